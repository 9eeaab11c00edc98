"""Every notebook in notebooks/ executes end to end (fast settings via BELIEF_FAST=1).

The campaign notebooks (04, 07: 90 s and 34 s even in fast mode; 06: a campaign with order
effects, a compile of its own; 08: a few minutes with its cost-model compile) run with the slow
tests, so that the default suite stays under ten minutes; `.ci/run` runs both."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
SLOW = {"04_campaign_and_replay", "06_order_effects", "07_against_the_limit",
        "08_uncertain_costs"}
"""Notebooks that run whole campaigns (each > 30 s in fast mode): marked slow."""

CASES = [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in SLOW else [])
         for p in NOTEBOOKS]


def test_the_slow_list_names_existing_notebooks():
    assert SLOW <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_cell_has_an_id(path):
    """nbformat 4.5 cells carry ids (nbformat warns on reading a cell without one, and will
    refuse it); ``nbformat.validator.normalize`` adds the missing ones."""
    cells = json.loads(path.read_text())["cells"]
    assert [i for i, c in enumerate(cells) if not c.get("id")] == []


@pytest.mark.parametrize("path", CASES)
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("BELIEF_FAST", "1")
    # the kernel draws figures inline (as PNG outputs the documentation renders), off screen
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    executed = os.environ.get("BELIEF_EXECUTED_NOTEBOOKS", "").strip()
    if executed:  # the documentation renders this executed copy (docs/_ext/belief_docs.py)
        Path(executed).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, Path(executed) / path.name)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors
    assert os.environ["BELIEF_FAST"] == "1"
