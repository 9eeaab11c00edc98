"""Reference pages generated from the code itself, at build time.

* ``reference/api.rst`` — every name of ``belief.__all__`` (the public API), grouped by the
  module that defines it, each documented from its docstring by autosummary/autodoc.
* ``reference/cli.md`` — every command and every flag of ``belief``, read from the argparse
  parser of :func:`belief.cli.main.build_parser` (the parser the executable runs).
* ``reference/input-tables.md`` — every evidence table with its required columns, read from the
  validators' own column definitions (:data:`belief.inputs.tables.TABLES` and the ``*_COLUMNS``
  constants, :mod:`belief.inputs.costs`) and their docstrings.
* ``reference/decision.md`` — every variable and attribute of the decision Dataset with its
  meaning, units and type, from :mod:`belief.decision.schema` (the declaration the engine
  checks its output against).
* ``tutorials/*.ipynb`` — copies of the notebooks in ``notebooks/`` (rendered by myst-nb without
  executing them).  When ``$BELIEF_EXECUTED_NOTEBOOKS`` names a folder, a notebook executed
  there by ``tests/test_notebooks.py`` (which writes its executed copy to that folder) is
  copied instead, so the site shows its outputs without running it a second time
  (``.ci/run`` sets the folder for the test suites and the docs build).

The generated files are ignored by git; a file is rewritten only when its text changed, so an
incremental build stays incremental.  ``python docs/_ext/belief_docs.py`` writes them without
Sphinx; ``python docs/_ext/belief_docs.py --coverage`` prints the reference coverage.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent

GENERATED = ("reference/api.rst", "reference/cli.md", "reference/input-tables.md",
             "reference/decision.md")


# --------------------------------------------------------------------------------------------
# the Python API


def public_api() -> dict[str, list[str]]:
    """``belief.__all__`` grouped by the module that defines each name."""
    import belief

    groups: dict[str, list[str]] = {}
    for name in belief.__all__:
        groups.setdefault(belief._EXPORTS[name], []).append(name)
    return groups


def api_rst() -> str:
    """The API page (reST, so that autosummary's stub pages and toctree are native)."""
    title = "Python API"
    lines = [title, "=" * len(title), "",
             "Every public name of the package: ``belief.__all__``, importable as "
             "``belief.<name>`` (loaded lazily, so ``import belief`` stays cheap). Generated "
             "from the docstrings, grouped by the module that defines each name.", ""]
    for module, names in public_api().items():
        first = (inspect.getdoc(__import__(module, fromlist=["_"])) or "").split("\n\n")[0]
        head = f"``{module}``"
        lines += [head, "-" * len(head), "", " ".join(first.split()), "",
                  ".. autosummary::", "   :toctree: generated", "",
                  *[f"   belief.{n}" for n in names], ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the command line


def _subcommands(parser: argparse.ArgumentParser):
    """``(name, help, subparser)`` of every command, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name) or "", sub


def cli_flags(parser: argparse.ArgumentParser | None = None) -> dict[str, list[str]]:
    """Every command's arguments as written on a command line (``--flag`` or the positional's
    name): the set a complete CLI reference must show."""
    parser = parser or _parser()
    return {name: [_arg_name(a) for a in _arguments(sub)]
            for name, _, sub in _subcommands(parser)}


def _parser() -> argparse.ArgumentParser:
    from belief.cli.main import build_parser

    return build_parser()


def _arguments(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]


def _arg_name(action: argparse.Action) -> str:
    return ", ".join(action.option_strings) if action.option_strings else action.dest


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _help(sub: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return sub._get_formatter()._expand_help(action)


def cli_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The CLI reference page: one section per command, one table row per argument."""
    parser = parser or _parser()
    lines = ["# Command line", "",
             "Generated from the parser that `belief` runs (`belief.cli.main.build_parser`), so "
             "every command and flag appears here with its help text and its group (the shared "
             "flags come from one table, `belief.cli.flags.TABLE`: the same setting has the "
             "same flag on every command). Refused input is one line "
             "on stderr naming the flag, and exit code 2; Ctrl-C exits with 130.", "",
             "```text", parser.format_usage().strip(), "```", ""]
    for name, help_, sub in _subcommands(parser):
        lines += [f"## `belief {name}`", "", _cell(help_).capitalize() + ".", ""]
        if sub.description:
            lines += [_cell(sub.description), ""]
        lines += ["```text", sub.format_usage().strip(), "```", "",
                  "| argument | group | value | meaning |", "|---|---|---|---|"]
        group_of = {id(a): g.title for g in sub._action_groups for a in g._group_actions}
        for action in _arguments(sub):
            meta = "" if action.nargs == 0 else (action.metavar or
                                                  (action.dest.upper() if action.option_strings
                                                   else ""))
            if action.choices is not None and action.nargs != 0 and not action.metavar:
                meta = "{" + ",".join(map(str, action.choices)) + "}"
            group = group_of.get(id(action), "")
            group = "" if group in ("options", "positional arguments") else group
            lines.append(f"| `{_arg_name(action)}` | {group} "
                         f"| {_cell(meta) and '`' + _cell(meta) + '`'} "
                         f"| {_cell(_help(sub, action))} |")
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the input tables


def _rules(doc: str | None) -> str:
    """A validator's docstring after its first line, as one paragraph (roles kept)."""
    text = inspect.cleandoc(doc or "")
    return " ".join(text.split("\n\n", 1)[1].split()) if "\n\n" in text else ""


def input_tables() -> dict[str, tuple[str, ...]]:
    """Every evidence table a folder may hold and its required columns, from the validators'
    definitions (one source of truth with the checks)."""
    from belief.inputs import tables as t
    from belief.inputs.costs import COST_COLUMNS

    required = {"paired": t.PAIRED_COLUMNS, "safety": t.SAFETY_COLUMNS,
                "policy_evals": t.POLICY_EVAL_COLUMNS, "deployment": t.DEPLOYMENT_COLUMNS,
                "gain_estimates": t.GAIN_ESTIMATE_COLUMNS, "sensitivity": t.SENSITIVITY_COLUMNS,
                "transfer": t.TRANSFER_COLUMNS, "model_updates": t.MODEL_UPDATE_COLUMNS,
                "direction_estimates": t.DIRECTION_ESTIMATE_COLUMNS,
                "sim_paired": t.SIM_PAIRED_COLUMNS}
    out = {table: required[field] for table, (field, _) in t.TABLES.items()}
    out["costs"] = COST_COLUMNS
    return out


def tables_markdown() -> str:
    from belief.inputs import costs
    from belief.inputs import tables as t

    cols = input_tables()
    lines = ["# Input tables and the candidate file", "",
             "Generated from the validators' own column definitions "
             "(`belief.inputs.tables.TABLES`, the `*_COLUMNS` constants and "
             "`belief.inputs.costs.COST_COLUMNS`) and their docstrings: what is listed here is "
             "what `belief fit`, `belief.fit` and `belief.Evidence` check.", "",
             "An evidence folder holds one file per table, named `<table>.csv` or "
             "`<table>.parquet`; `paired_evaluations` is required, the others are optional. A "
             "refused row is one line naming the table, the row and the rule (exit code 2 on "
             "the command line, `belief.InputError` in Python), and nothing is kept from a "
             "refused table.", "",
             "| table | required columns | `Evidence` field |", "|---|---|---|"]
    for table, (field, _) in t.TABLES.items():
        lines.append(f"| `{table}` | {', '.join(f'`{c}`' for c in cols[table])} | "
                     f"`{field}` |")
    lines.append("| `costs` | `step`, `candidate`, one column per resource | — |")
    lines += ["", "The sensitivity and transfer tables take one outcome family for the whole "
              "table: " + "; ".join(f"sensitivity {k}: " + ", ".join(f"`{c}`" for c in v)
                                    for k, v in t.SENS_FAMILIES.items())
              + "; " + "; ".join(f"transfer {k}: " + ", ".join(f"`{c}`" for c in v)
                                 for k, v in t.TRANSFER_FAMILIES.items())
              + f". Perturbation settings are columns `{t.XI_PREFIX}<direction>`.", ""]
    for table, (_, validator) in t.TABLES.items():
        lines += [f"## `{table}`", "",
                  "Required columns: " + ", ".join(f"`{c}`" for c in cols[table]) + ".", "",
                  inspect.cleandoc(validator.__doc__ or "").split("\n\n")[0].replace("\n", " "),
                  "", _md_roles(_rules(validator.__doc__)), ""]
    lines += ["## `costs`", "", "Required columns: " + ", ".join(f"`{c}`" for c in
                                                              costs.COST_COLUMNS)
              + " and one column per resource of the candidate file.", "",
              _md_roles(_rst_to_markdown(costs.__doc__)), "",
              *_candidate_file_section(),
              "## Column meanings of `paired_evaluations`", "",
              _md_roles(_rst_to_markdown(t.__doc__, keep="Paired evaluations")), ""]
    return "\n".join(lines)


def _candidate_file_section() -> list[str]:
    """The candidate file's format: the annotated example of :mod:`belief.inputs.candidates`
    (the loader's own docstring) and the optional tables of :mod:`belief.inputs.candidate_file`."""
    import textwrap

    from belief.inputs import candidates
    from models.registry import model_names

    doc = inspect.cleandoc(candidates.__doc__ or "")
    intro, _, example = doc.partition("::\n")
    return ["## The candidate file", "",
            _md_roles(" ".join(intro.split("\n\n", 1)[-1].split())) + ":", "",
            "```toml", textwrap.dedent(example).strip("\n"), "```", "",
            "Optional tables besides these: `[weights]` (the default resource weights λ of "
            "`belief decide`, one number per resource) and `[priors.<model>]`, `<model>` one of "
            + ", ".join(f"`{m}`" for m in model_names())
            + " (see the how-to guide on priors and order effects).", ""]


def _rst_to_markdown(doc: str | None, keep: str | None = None) -> str:
    """A module docstring's paragraphs after its first line, its simple reST tables as Markdown
    tables (``keep``: only the section whose heading line is ``keep``)."""
    text = inspect.cleandoc(doc or "")
    body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
    raw = body.splitlines()
    lines = [ln.strip() for ln in raw]
    if keep is not None:
        start = next(i for i, ln in enumerate(lines) if ln.startswith(keep)) + 1
        stop = next((i for i in range(start, len(lines)) if lines[i] and
                     not raw[i].startswith(" ")), len(lines))
        raw, lines = raw[start:stop], lines[start:stop]
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("====") and i + 2 < len(lines):
            indent = len(raw[i]) - len(lines[i])
            cut = indent + lines[i].index(" ") + 1  # the second column starts after the rule

            def split(k: int, cut: int = cut, indent: int = indent) -> list[str]:
                return [raw[k][indent:cut].strip(), raw[k][cut:].strip()]

            head = split(i + 1)
            rows: list[list[str]] = []
            j = i + 3
            while j < len(lines) and not lines[j].startswith("===="):
                first, rest = split(j)
                if first or not rows:
                    rows.append([first, rest])
                else:
                    rows[-1][1] += " " + rest
                j += 1
            out += ["", f"| {head[0]} | {head[1]} |", "|---|---|",
                    *[f"| `{a}` | {b.replace('|', chr(92) + '|')} |" for a, b in rows], ""]
            i = j + 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _md_roles(text: str) -> str:
    """reST roles and literals of a docstring as Markdown literals."""
    import re

    text = re.sub(r":(?:data|func|mod|class|meth|attr):`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    return text


# --------------------------------------------------------------------------------------------
# the decision Dataset


def decision_markdown() -> str:
    """The decision Dataset's page, from :mod:`belief.decision.schema`."""
    from belief.decision.schema import reference_markdown

    return reference_markdown()


# --------------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def generate() -> None:
    """Write the generated reference pages and copy the notebooks into ``tutorials/``."""
    _write(DOCS / "reference" / "api.rst", api_rst())
    _write(DOCS / "reference" / "cli.md", cli_markdown())
    _write(DOCS / "reference" / "input-tables.md", tables_markdown())
    _write(DOCS / "reference" / "decision.md", decision_markdown())
    executed = os.environ.get("BELIEF_EXECUTED_NOTEBOOKS", "").strip()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        source = nb
        if executed and (Path(executed) / nb.name).is_file():
            source = Path(executed) / nb.name  # the tests' executed copy, with its outputs
        target = DOCS / "tutorials" / nb.name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)


def _documented(obj: object) -> bool:
    return bool((inspect.getdoc(obj) or "").strip())


def coverage() -> dict[str, tuple[int, int]]:
    """Reference coverage as (documented, total):

    * ``api``: names of ``belief.__all__`` listed on the API page with a docstring;
    * ``modules``: names in the ``__all__`` of every module of ``belief`` and ``models`` that
      have a docstring of their own (constants and type aliases count as undocumented unless
      the object carries one) — a wider figure than the site's API page;
    * ``cli``: arguments of every command shown on the CLI page with a help text;
    * ``tables``: evidence tables on the input-table page with all their required columns.
    """
    import importlib
    import pkgutil

    import belief
    import models

    page = api_rst()
    api = [n for n in belief.__all__
           if f"belief.{n}" in page and _documented(getattr(belief, n))]
    seen: set[int] = set()
    mod_total = mod_doc = 0
    for pkg in (belief, models):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name in getattr(module, "__all__", []):
                obj = getattr(module, name, None)
                if id(obj) in seen and (inspect.isclass(obj) or inspect.isfunction(obj)):
                    continue  # a re-export counts once
                seen.add(id(obj))
                mod_total += 1
                own = (inspect.isclass(obj) or inspect.isfunction(obj)
                       or inspect.ismodule(obj))
                mod_doc += bool(own and _documented(obj))
    parser = _parser()
    cli_page = cli_markdown(parser)
    flags = [(cmd, arg) for cmd, args in cli_flags(parser).items() for arg in args]
    helped = {(name, _arg_name(a)) for name, _, sub in _subcommands(parser)
              for a in _arguments(sub) if _help(sub, a)}
    cli_doc = [f for f in flags if f"`{f[1]}`" in cli_page and f in helped]
    tables_page = tables_markdown()
    tabs = input_tables()
    tab_doc = [t for t, cols in tabs.items()
               if f"## `{t}`" in tables_page and all(f"`{c}`" in tables_page for c in cols)]
    return {"api": (len(api), len(belief.__all__)), "modules": (mod_doc, mod_total),
            "cli": (len(cli_doc), len(flags)), "tables": (len(tab_doc), len(tabs))}


def _on_config_inited(app, config) -> None:
    generate()  # before Sphinx lists the source files, so that the generated pages are found


def setup(app):
    app.connect("config-inited", _on_config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}


if __name__ == "__main__":
    import sys

    if "--coverage" in sys.argv:
        for key, (done, total) in coverage().items():
            print(f"{key:8s} {done}/{total} documented")
    else:
        generate()
