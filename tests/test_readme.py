"""Every code block of the README and of the how-to guides (docs/howto/*.md) runs as a test.

* ``python`` blocks are executed, in order, one namespace per page, from a temporary working
  folder (they find the shipped example through ``belief.example_paths()``).  The README's
  quick start fits a model, so its test also checks what the decision says.
* shell blocks: every ``uv run belief …`` (or ``belief …``) command is parsed by the parser
  the executable runs (:func:`belief.cli.main.build_parser`), so a renamed or removed flag, a
  missing argument or a value argparse refuses fails here; ``uv run --group G …`` names a
  dependency group of pyproject.toml.  The commands are not executed (a fit takes minutes):
  the CLI tests run them, and the slow test below runs one guide's commands end to end.
* ``toml`` blocks parse as a candidate file: a block with ``[[candidate]]`` tables on its own,
  a fragment (``[priors.…]``, ``[[interaction]]``) appended to the shipped example's file; the
  priors are built as ``belief fit`` builds them, so an unknown field or family fails here.
* ``text`` blocks and blocks without a language (diagrams, expected output) are not run;
  ``sh``/``shell``/``console`` count as ``bash`` (``$ `` prompts dropped), ``json`` blocks must
  parse; any other language fails the test, so that no code block goes untested unnoticed.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HOWTOS = sorted((ROOT / "docs" / "howto").glob("*.md"))
PAGES = [README, *HOWTOS]
RUN_LANGUAGES = {"python", "bash", "toml", "json"}
SHELL = {"bash", "sh", "shell", "console"}

_BLOCK = re.compile(r"^```(\{?[\w-]*\}?)[^\n]*\n(.*?)^```", flags=re.S | re.M)


def _found(path: Path) -> list[tuple[str, str]]:
    """(language, code) of every fenced block; MyST directives (```{toctree}) are no code."""
    return [(lang, code) for lang, code in _BLOCK.findall(path.read_text(encoding="utf-8"))
            if not lang.startswith("{")]


def blocks(path: Path, language: str | None = None) -> list[str]:
    if language == "bash":
        return [code for lang, code in _found(path) if lang in SHELL]
    return [code for lang, code in _found(path) if language is None or lang == language]


def _languages(path: Path) -> set[str]:
    return {lang for lang, _ in _found(path)}


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_howto_guides_are_found():
    assert len([p for p in HOWTOS if p.name != "index.md"]) >= 7, [p.name for p in HOWTOS]


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_every_block_has_a_known_language(path):
    unknown = _languages(path) - RUN_LANGUAGES - SHELL - {"text", ""}
    assert not unknown, f"{path.name}: blocks in {unknown} are neither run nor text"


def test_json_blocks_parse():
    import json

    for path in PAGES:
        for code in blocks(path, "json"):
            json.loads(code)  # raises on a broken example


# ---- python --------------------------------------------------------------------------------


def test_readme_quick_start_is_in_the_first_60_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("```python"))
    assert first <= 60, first
    assert len(lines) <= 150, len(lines)


def test_readme_example_imports_from_belief_alone():
    (code,) = blocks(README, "python")
    imports = re.findall(r"^\s*(?:from\s+(\S+)\s+import|import\s+(\S+))", code, flags=re.M)
    assert imports and all((a or b) == "belief" for a, b in imports), imports


def test_readme_example_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    (code,) = blocks(README, "python")
    exec(compile(code, str(README), "exec"), namespace)
    decision = namespace["decision"]
    assert decision.attrs["functional"] == "lcb:0.2"
    assert decision.attrs["cvu_status"] == "estimated"
    out = capsys.readouterr().out
    assert decision.attrs["chosen"] in out


HOWTO_PYTHON = [p for p in HOWTOS if blocks(p, "python")]


@pytest.mark.parametrize("path", HOWTO_PYTHON, ids=_page_id)
def test_howto_python_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__howto__"}
    for code in blocks(path, "python"):
        exec(compile(code, str(path), "exec"), namespace)  # a failing example raises here


# ---- bash ----------------------------------------------------------------------------------


def _commands(code: str, language: str = "bash") -> list[list[str]]:
    """Each command line of a shell block as argv (comments dropped; in a ``console`` block
    only the lines after a ``$ `` prompt, the others being output)."""
    out = []
    for line in code.splitlines():
        if language == "console" and not line.startswith("$ "):
            continue
        line = line.split(" #", 1)[0].strip().removeprefix("$ ")
        if line and not line.startswith("#"):
            out.append(shlex.split(line))
    return out


def _dependency_groups() -> set[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f).get("dependency-groups", {}))


BASH_PAGES = [p for p in PAGES if blocks(p, "bash")]


@pytest.mark.parametrize("path", BASH_PAGES, ids=_page_id)
def test_shell_commands_parse(path):
    from belief.cli.main import build_parser

    checked = 0
    for language, code in _found(path):
        if language not in SHELL:
            continue
        for argv in _commands(code, language):
            rest = argv
            if argv[:2] == ["uv", "run"]:
                rest = argv[2:]
                while rest and rest[0].startswith("--"):  # uv's own options
                    option = rest.pop(0)
                    if option in ("--group", "--with"):
                        value = rest.pop(0)
                        if option == "--group":
                            assert value in _dependency_groups(), f"{path.name}: group {value}"
            if not rest or rest[0] != "belief":
                continue  # another program (pytest, sphinx-build, jupyter, export …)
            try:
                args = build_parser().parse_args(rest[1:])
            except SystemExit as exc:  # argparse refused it: say which command
                raise AssertionError(f"{path.name}: `{shlex.join(rest)}` is refused") from exc
            assert args.command == rest[1]
            checked += 1
    if path == README:
        assert checked >= 3, checked  # demo, fit, replay at least


# ---- toml ----------------------------------------------------------------------------------

TOML_PAGES = [p for p in PAGES if blocks(p, "toml")]


@pytest.mark.parametrize("path", TOML_PAGES, ids=_page_id)
def test_toml_blocks_are_valid_candidate_files(path):
    import belief
    from belief.inputs.candidate_file import parse_candidate_text
    from belief.workflow.fit import model_priors

    _, example = belief.example_paths()
    base = Path(example).read_text(encoding="utf-8")
    for code in blocks(path, "toml"):
        tomllib.loads(code)
        text = code if "[[candidate]]" in code else base + "\n" + code
        cfile = parse_candidate_text(text, path.name)
        model_priors(cfile)  # the [priors.…] tables built as `belief fit` builds them
        if "[[interaction]]" in code:
            assert cfile.candidates.interactions


# ---- executed end to end (slow) ------------------------------------------------------------

EXECUTED = ["fit-your-csv-files.md"]
"""How-to pages whose shell commands run in order as written (fit, check, decide, report on the
shipped example: minutes).  The other pages' commands need a campaign folder made by a demo or
past campaigns of one's own, or take far longer (a demo, a replay); they are parsed above."""


@pytest.mark.slow
@pytest.mark.parametrize("name", EXECUTED)
def test_howto_commands_run(name, tmp_path, monkeypatch):
    from belief.cli.main import main

    (tmp_path / "belief").symlink_to(ROOT / "belief")  # the example's paths, as from the root
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ran = []
    for code in blocks(ROOT / "docs" / "howto" / name, "bash"):
        for argv in _commands(code):
            assert argv[:3] == ["uv", "run", "belief"], argv
            assert main(argv[3:]) == 0, shlex.join(argv)
            ran.append(argv[3])
    assert ran == ["fit", "check", "decide", "report"]
    assert (tmp_path / "belief.nc").exists() and (tmp_path / "report.html").exists()
    assert (tmp_path / "decision" / "decision.csv").exists()
