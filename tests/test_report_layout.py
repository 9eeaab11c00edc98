"""What a user reads fits: the terminal decision table at 100 columns, the report's header, and
the HTML report at a laptop's 1280 px in a real headless browser (Debian's chromium, driven by
Playwright with the system executable; skipped, saying why, where it is missing).

One short demo (1 step, 150 draws per chain) and one ``belief decide`` on its belief serve
every test of the module."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from pathlib import Path

import numpy as np
import pytest

from belief.cli.main import main

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """``belief demo --steps 1 --draws 150`` (its stdout, as in a pipe) and
    ``belief decide`` on the belief it wrote (the default CVU, β = 1)."""
    root = tmp_path_factory.mktemp("layout")
    out, dec = root / "demo", root / "decision"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["demo", "--steps", "1", "--draws", "150", "--act-on-unreliable",
                     "--out", str(out)]) == 0
        assert main(["decide", str(out / "belief.nc"), "--out", str(dec)]) == 0
    return out, dec, buf.getvalue()


@pytest.fixture(scope="module")
def decision(demo_run):
    from belief.decision.decision_file import load_decision

    return load_decision(demo_run[1])


def _render(renderable, width: int) -> list[str]:
    from rich.console import Console

    con = Console(width=width, record=True, file=io.StringIO())
    con.print(renderable)
    return [line.rstrip() for line in con.export_text().splitlines()]


# -- the terminal table -----------------------------------------------------------------------
def test_the_compact_table_keeps_every_row_on_one_line_at_100_columns(decision):
    from belief.report.tables import decision_rich_table, shows_channel_split

    ids = [str(c) for c in decision["candidate"].values]
    for ascii_only in (False, True):
        lines = _render(decision_rich_table(decision, "step 2", width=100,
                                            ascii_only=ascii_only), 100)
        assert max(map(len, lines)) <= 100
        head = [i for i, line in enumerate(lines) if line.startswith("candidate ")]
        assert len(head) == 1 + shows_channel_split(decision)
        assert lines[head[0]].split()[:9] == ["candidate", "φ(ΔJ)", "C_λ", "U0", "CVU", "Q",
                                              "vs", "stop", "feasible"]
        main_rows = lines[head[0] + 2: head[0] + 2 + len(ids)]  # header, rule, one per row
        assert [row.split()[0] for row in main_rows] == ids  # no row wraps onto a second line
        assert "|" not in "".join(main_rows)  # the split of CVU is no longer one cell
        for row in main_rows:  # a number column keeps its decimals
            assert len(row.split()) >= 9


def test_the_compact_table_formats_each_column_with_one_decimal_place(decision):
    from belief.report.tables import column_decimals, decision_rich_table

    lines = _render(decision_rich_table(decision, "step 2", width=100, ascii_only=True), 100)
    start = next(i for i, line in enumerate(lines) if line.startswith("candidate ")) + 2
    rows = [line.split() for line in lines[start:start + decision.sizes["candidate"]]]
    cvu = [r[4] for r in rows]
    decimals = {len(c.split("±")[0].split(".")[1]) for c in cvu if c != "—"}
    se = decision["cvu_se"].values
    assert decimals == {column_decimals(decision["cvu"].values, se)}
    typical = np.median(se[np.isfinite(se) & (se > 0)])  # its first significant digit
    assert 10.0 ** -min(decimals) <= typical < 10.0 ** (1 - min(decimals))
    for j in (1, 2, 3, 5):  # φ, C_λ, U0, Q: one number of decimals per column
        assert len({len(r[j].split(".")[1]) for r in rows if r[j] != "—"}) == 1


def test_the_demo_table_in_a_pipe_fits_100_columns(demo_run):
    _, _, text = demo_run
    table = [line.rstrip() for line in text.splitlines()  # titles, headers, rules, rows
             if re.match(r"^step \d+ · policy ", line) or line.startswith(("candidate", "----"))
             or re.match(r"^[a-z_0-9]+ +-?\d", line)]
    assert table and max(map(len, table)) <= 100, max(table, key=len)


def test_wide_shows_every_column_and_whole_reasons(decision):
    from belief.report.tables import decision_rich_table

    lines = _render(decision_rich_table(decision, "step 2", wide=True, ascii_only=True), 400)
    head = next(line for line in lines if line.startswith("| candidate"))
    for col in ("role", "MV", "est.", "CVU own", "P_exec UCB", "reason"):
        assert f" {col} " in head, col
    for reason in decision["excluded_reason"].values:
        assert reason == "chosen" or any(str(reason) in line for line in lines)


def test_wide_is_a_flag_of_every_command_that_prints_the_table(capsys):
    for command in ("demo", "decide", "manual"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--wide" in capsys.readouterr().out, command


def test_column_decimals_follow_the_error_or_three_significant_digits():
    from belief.report.tables import column_decimals, fixed

    assert column_decimals([0.012, -0.3], [0.0023, 0.004, np.nan]) == 3
    assert column_decimals([0.081, 0.0009], None) == 4  # 3 significant digits of 0.081
    assert column_decimals([19.2, 3.5]) == 1
    assert column_decimals([0.0, np.nan]) == 3
    assert column_decimals([0.5], [0.0, np.nan]) == 3  # no positive error: digits
    assert fixed(-0.00004, 3) == "0.000" and fixed(np.nan, 2) == "—"


# -- the report's header ---------------------------------------------------------------------
def _header(fitted) -> str:
    from belief.report.document import render_report

    text, _ = render_report(fitted, None, "md", figures={})
    return text.split("## ")[0]


def test_the_header_says_how_the_demo_belief_was_made(demo_run):
    from belief.workflow.belief_file import load

    fitted = load(demo_run[0] / "belief.nc")
    head = _header(fitted)
    assert "?" not in head and "not recorded" not in head
    p = fitted.provenance()
    assert f"sampler: {p['chains']} chains × 150 draws (+150 tuning), seed {p['seed']}" in head
    assert p["chains"] == 4 and isinstance(p["seed"], int)
    rows = ", ".join(f"{k} {v}" for k, v in p["evidence_rows"].items() if v)
    assert f"evidence: campaign demo/ (its evidence/ folder) — {rows}" in head


def test_an_older_belief_says_not_recorded(demo_run):
    from belief.workflow.belief_file import load

    fitted = load(demo_run[0] / "belief.nc")
    old = fitted.belief.copy()
    for key in ("fit_chains", "fit_draws", "fit_tune", "fit_seed", "evidence_source"):
        del old.attrs[key]
    head = _header(dataclasses.replace(fitted, belief=old))
    assert "?" not in head
    rows = ", ".join(f"{k} {v}" for k, v in fitted.provenance()["evidence_rows"].items() if v)
    assert f"evidence: source not recorded — {rows}" in head
    assert "sampler: settings not recorded, seed not recorded" in head


# -- the HTML report in a headless browser ---------------------------------------------------
@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="no /usr/bin/chromium: install Debian's chromium (apt-get install -y "
                           "chromium; .ci/run does) to check the report in a browser")
def test_the_report_fits_a_laptop_screen_and_every_figure_loads(demo_run, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright (the dev dependency group) not installed")
    out, dec, _ = demo_run
    html = tmp_path / "report.html"
    assert main(["report", str(out / "belief.nc"), "--decision", str(dec), "--out",
                 str(html)]) == 0
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            m = page.evaluate("""() => ({
                scroll: document.documentElement.scrollWidth,
                client: document.documentElement.clientWidth,
                images: Array.from(document.images).map(i => [i.alt, i.complete,
                                                              i.naturalWidth]),
                tables: Array.from(document.querySelectorAll('div.table')).map(
                    d => [d.scrollWidth, d.clientWidth, d.innerText.slice(0, 40)]),
                header: document.querySelector('ul').innerText})""")
        finally:
            browser.close()
    assert m["scroll"] <= m["client"], (m["scroll"], m["client"])
    assert len(m["images"]) >= 4
    for alt, complete, width in m["images"]:
        assert complete and width > 0, alt
    for scroll, client, head in m["tables"]:  # no table needs its own scroll bar either
        assert scroll <= client, (head, scroll, client)
    assert "?" not in m["header"] and "chains ×" in m["header"]
