"""The shape of a package's code: its longest functions and largest parameter counts.

Usage: ``python benchmarks/code_shape.py [FOLDER] [--top N] [--max-lines L] [--max-params P]``
(default ``belief/decision``, top 10, limits 80 lines and 8 parameters).  A function's length
is its source lines from ``def`` to its last line (decorators and docstring included); its
parameters count every positional, keyword-only and ``*``/``**`` parameter, ``self`` and
``cls`` excluded.  Nested functions are measured on their own and also count in their parent.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def shapes(folder: Path) -> list[tuple[int, int, str]]:
    """(lines, parameters, "file:line name") of every function under ``folder``."""
    rows = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
                names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
                n_params = len([n for n in names if n not in ("self", "cls")])
                lines = node.end_lineno - node.lineno + 1
                rows.append((lines, n_params, f"{path}:{node.lineno} {node.name}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="belief/decision")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--max-lines", type=int, default=80)
    parser.add_argument("--max-params", type=int, default=8)
    args = parser.parse_args()
    rows = shapes(Path(args.folder))
    files = len(list(Path(args.folder).rglob("*.py")))
    print(f"{args.folder}: {files} files, {len(rows)} functions")
    print("longest functions (lines, params):")
    for lines, params, name in sorted(rows, key=lambda r: -r[0])[:args.top]:
        print(f"  {lines:4d} {params:3d}  {name}")
    print("most parameters (params, lines):")
    for lines, params, name in sorted(rows, key=lambda r: -r[1])[:args.top]:
        print(f"  {params:4d} {lines:3d}  {name}")
    over = [r for r in rows if r[0] > args.max_lines or r[1] > args.max_params]
    print(f"over {args.max_lines} lines or {args.max_params} parameters: {len(over)} functions")


if __name__ == "__main__":
    main()
