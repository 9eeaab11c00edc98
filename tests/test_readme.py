"""The README's Python example runs as written and imports from ``belief`` alone."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, "the README has one Python example"
    return blocks[0]


def test_readme_example_imports_from_belief_alone():
    code = _python_example()
    imports = re.findall(r"^\s*(?:from\s+(\S+)\s+import|import\s+(\S+))", code, flags=re.M)
    assert imports and all((a or b) == "belief" for a, b in imports), imports


def test_readme_example_runs(capsys):
    namespace: dict = {}
    exec(compile(_python_example(), str(README), "exec"), namespace)
    decision = namespace["decision"]
    assert decision.attrs["functional"] == "lcb:0.2"
    assert decision.attrs["cvu_status"] == "estimated"
    out = capsys.readouterr().out
    assert decision.attrs["chosen"] in out
