"""The command line's settings vocabulary: one table of flags in argument groups, the same name
for the same setting on every command, the deprecated names, and ``--effort``."""

from __future__ import annotations

import argparse

import pytest

from belief.cli.flags import GROUPS, TABLE, add_flags, as_flag, deprecation_notes
from belief.cli.main import build_parser, main
from belief.decision.settings import EFFORTS, CVUSettings
from belief.errors import InputError

DECIDING = ("decide", "report", "demo", "manual", "replay")


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(p: argparse.ArgumentParser, deprecated: bool = False) -> dict[str, str]:
    """{option: group title} of ``p`` (the deprecated names' group only with ``deprecated``)."""
    out = {}
    for group in p._action_groups:
        if (group.title == "deprecated names") != deprecated:
            continue
        for action in group._group_actions:
            for opt in action.option_strings:
                out[opt] = group.title
    return out


# -- groups and names ----------------------------------------------------------------------------
def test_every_deciding_command_shows_its_table_flags_in_their_groups():
    commands = _commands()
    for name in DECIDING:
        opts = _options(commands[name])
        shared = [o for o in opts if o in TABLE]
        assert len(shared) >= 8, (name, shared)
        for opt in shared:
            assert opts[opt] == TABLE[opt].group, (name, opt, opts[opt])
        text = commands[name].format_help()
        for group in ("decision:", "CVU:", "look-ahead:", "output:"):
            assert f"\n{group}\n" in text, (name, group)
        assert "--effort" in opts and "--continuation" in opts and "--refit" in opts
    for name in ("demo", "manual"):
        assert "\ncosts:\n" in commands[name].format_help()


def test_one_flag_name_per_setting_on_every_command():
    """The same destination (setting) is set by the same flag on every command; the old names
    are only in the deprecated group."""
    names: dict[str, set[str]] = {}
    for p in _commands().values():
        for action in p._actions:
            if not action.option_strings or action.default is argparse.SUPPRESS:
                continue
            long = [o for o in action.option_strings if o.startswith("--")
                    and not o.startswith("--no-")]
            names.setdefault(action.dest, set()).update(long)
    several = {dest: flags for dest, flags in names.items() if len(flags) > 1}
    assert not several
    assert names["horizon"] == {"--horizon"} and names["refit"] == {"--refit"}
    assert names["tune"] == {"--tune"}


def test_a_refused_setting_is_named_by_its_one_flag_everywhere():
    for setting, flag in (("horizon", "--horizon"), ("FitSettings.tune", "--tune"),
                          ("FitSettings.draws", "--draws"),
                          ("CVUSettings.inner_outcomes", "--inner-outcomes")):
        for cmd in DECIDING:
            err = as_flag(InputError(setting, "bad"), cmd)
            assert err.table == flag, (cmd, setting, err)


def test_add_flags_refuses_nothing_it_does_not_know_and_drops_empty_groups():
    p = argparse.ArgumentParser()
    groups = add_flags(p, "x", {"--beta": 1.0})
    assert set(groups) == {"decision"}
    assert [g.title for g in p._action_groups if g.title in GROUPS] == ["decision"]
    with pytest.raises(KeyError):
        add_flags(argparse.ArgumentParser(), "x", ["--no-such-flag"])


# -- deprecated names ----------------------------------------------------------------------------
OLD_NAMES = [  # (command, argv with the old name, destination, value, new name)
    ("demo", ["demo", "--steps", "3"], "horizon", 3, "--horizon"),
    ("manual", ["manual", "--out", "m", "--steps", "4"], "horizon", 4, "--horizon"),
    ("replay", ["replay", "log", "--out", "o", "--refits"], "refit", True, "--refit"),
    ("replay", ["replay", "log", "--out", "o", "--no-refits"], "refit", False, "--no-refit"),
]


@pytest.mark.parametrize(("command", "argv", "dest", "value", "new"), OLD_NAMES)
def test_each_old_name_still_works_and_says_it_is_deprecated(monkeypatch, capsys, command,
                                                             argv, dest, value, new):
    import belief.cli.campaign
    import belief.cli.demo

    seen = {}

    def fake(args):  # the command, as far as its settings
        seen.update(vars(args))
        return 0

    module = belief.cli.demo if command == "demo" else belief.cli.campaign
    monkeypatch.setattr(module, f"cmd_{command}", fake)
    assert main(argv) == 0
    assert seen[dest] == value
    err = capsys.readouterr().err.strip().splitlines()
    old = argv[-2] if argv[-1].isdigit() else argv[-1]
    assert err == [f"belief: warning: {old} is deprecated, use {new} (the old name is "
                   "accepted until the next release)"]
    # the new name gives the same setting and no note
    monkeypatch.setattr(module, f"cmd_{command}", fake)
    new_argv = [new if a == old else a for a in argv]
    seen.clear()
    assert main(new_argv) == 0
    assert seen[dest] == value and not capsys.readouterr().err


def test_deprecated_old_names_are_listed_in_help_on_their_commands_only():
    commands = _commands()
    assert _options(commands["demo"], deprecated=True) == {"--steps": "deprecated names"}
    assert _options(commands["manual"], deprecated=True) == {"--steps": "deprecated names"}
    assert set(_options(commands["replay"], deprecated=True)) == {"--refits", "--no-refits"}
    assert not _options(commands["decide"], deprecated=True)
    assert "--steps" not in _options(commands["decide"])


def test_a_refusal_of_an_old_name_is_one_line_naming_it_and_its_successor(tmp_path, capsys,
                                                                          no_compute):
    code = main(["demo", "--steps", "0", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("belief: error: --steps: ") and "use --horizon" in err
    assert not (tmp_path / "o").exists()


def test_deprecation_notes_of_a_namespace():
    args = build_parser().parse_args(["demo", "--steps", "2"])
    assert deprecation_notes(args) == ["belief: warning: --steps is deprecated, use --horizon "
                                       "(the old name is accepted until the next release)"]
    assert deprecation_notes(build_parser().parse_args(["demo", "--horizon", "2"])) == []


# -- effort --------------------------------------------------------------------------------------
def test_effort_levels_map_to_the_documented_settings():
    assert tuple(EFFORTS) == ("fast", "default", "thorough")
    assert CVUSettings.for_effort("default") == CVUSettings()  # today's defaults
    assert EFFORTS["default"].refit is None
    fast = CVUSettings.for_effort("fast")
    assert (fast.n_outcomes, fast.continuation, fast.channel_split) == (64, "one_step", False)
    assert EFFORTS["fast"].refit is False
    thorough = CVUSettings.for_effort("thorough")
    assert (thorough.n_outcomes, thorough.continuation, thorough.inner_outcomes,
            thorough.max_refits) == (128, "lookahead2", 8, 2)
    assert EFFORTS["thorough"].refit is True
    # a level changes only its own fields of the base
    base = CVUSettings(workers=2, k_threshold=0.6)
    assert CVUSettings.for_effort("thorough", base).workers == 2
    assert CVUSettings.for_effort("thorough", base).k_threshold == 0.6
    with pytest.raises(InputError, match="effort: must be one of"):
        CVUSettings.for_effort("slow")


def test_at_effort_is_the_level_under_the_explicit_fields_and_refits():
    """One rule for ``--effort`` and ``decide(effort=)``: preset, then what was named; the
    level's refits replace the caller's default only where the level has one."""
    base = CVUSettings(workers=2)
    assert base.at_effort(None, {}, None) == (base, None)
    cvu, refit = base.at_effort("thorough", {"n_outcomes": 96}, False)
    assert (cvu.n_outcomes, cvu.continuation, cvu.workers, refit) == (96, "lookahead2", 2, True)
    assert base.at_effort("default", {}, True) == (base, True)  # no refits of its own
    assert base.at_effort("fast", {}, True)[1] is False
    with pytest.raises(InputError, match="effort: must be one of"):
        base.at_effort("slow")


def _decide_settings(*flags: str):
    from belief.cli.statistician import _decision_settings

    args = build_parser().parse_args(["decide", "b.nc", *flags])
    return _decision_settings(args), args.refit


def test_decide_effort_presets_and_explicit_flags_override_them():
    settings, refit = _decide_settings()
    assert settings.cvu == CVUSettings(workers=settings.cvu.workers) and refit is False
    assert _decide_settings("--effort", "default") == (settings, False)
    cvu, refit = _decide_settings("--effort", "thorough")
    assert (cvu.cvu.continuation, cvu.cvu.inner_outcomes, cvu.cvu.n_outcomes, refit) == (
        "lookahead2", 8, 128, True)
    cvu, refit = _decide_settings("--effort", "thorough", "--cvu-outcomes", "64", "--no-refit",
                                  "--inner-outcomes", "4")
    assert (cvu.cvu.n_outcomes, cvu.cvu.inner_outcomes, refit) == (64, 4, False)
    cvu, refit = _decide_settings("--effort", "fast", "--refit")
    assert (cvu.cvu.n_outcomes, refit) == (64, True)
    # --inner-outcomes needs a non-myopic continuation: the effort's counts
    _decide_settings("--effort", "thorough", "--inner-outcomes", "16")
    with pytest.raises(InputError, match="--inner-outcomes"):
        _decide_settings("--effort", "fast", "--inner-outcomes", "16")
    with pytest.raises(InputError, match="--max-refits"):
        _decide_settings("--effort", "fast", "--max-refits", "3")


def test_an_unknown_effort_is_one_line_naming_the_flag_and_the_levels(tmp_path, capsys):
    out = tmp_path / "d"
    code = main(["decide", str(tmp_path / "b.nc"), "--effort", "slow", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err == ("belief: error: --effort: must be one of ['fast', 'default', 'thorough'], "
                   "got 'slow'")
    assert not out.exists()


def test_campaign_effort_sets_the_campaigns_cvu_and_default_keeps_it():
    from dataclasses import replace

    from belief.campaign.loop import CampaignSettings
    from belief.cli.campaign import _replay_settings
    from belief.cli.demo import _settings

    def demo(*flags):
        return _settings(build_parser().parse_args(["demo", *flags]))[0].cvu

    today = demo()
    assert today == replace(CampaignSettings().cvu, workers=today.workers)
    assert demo("--effort", "default") == today and today.max_refits == 4
    assert demo("--effort", "fast").max_refits == 0  # no refits in a campaign
    assert demo("--no-refit").max_refits == 0
    thorough = demo("--effort", "thorough")
    assert (thorough.continuation, thorough.inner_outcomes, thorough.max_refits) == (
        "lookahead2", 8, 2)
    # replay: the log's settings unless a flag is given
    log = CampaignSettings(cvu=CVUSettings(n_outcomes=64, max_refits=3))
    args = build_parser().parse_args(["replay", "log", "--out", "o"])
    assert _replay_settings(args, log).cvu == log.cvu and args.use_refits is None
    args = build_parser().parse_args(["replay", "log", "--out", "o", "--effort", "fast"])
    s = _replay_settings(args, log)
    assert (s.cvu.n_outcomes, s.cvu.max_refits, args.use_refits) == (64, 0, False)
    args = build_parser().parse_args(["replay", "log", "--out", "o", "--refits"])
    assert _replay_settings(args, log).cvu == log.cvu and args.use_refits is True


def test_report_with_a_given_decision_refuses_an_effort_it_would_not_use():
    from belief.cli.statistician import _no_decision_flags_with_a_decision

    def args(*flags):
        return build_parser().parse_args(["report", "b.nc", "--decision", "d", *flags])

    _no_decision_flags_with_a_decision(args())  # nothing given: nothing refused
    for flags, flag in ((["--effort", "fast"], "--effort"), (["--no-refit"], "--refit"),
                        (["--cvu-outcomes", "64"], "--cvu-outcomes")):
        with pytest.raises(InputError, match=f"^{flag}: {flag} would not change a given"):
            _no_decision_flags_with_a_decision(args(*flags))
