"""The calls one `belief decide` makes inside belief/decision/, counted at run time.

Usage: ``python benchmarks/cvu_calls.py BELIEF.nc OUT_FOLDER [decide flags]``.  Runs
``belief decide`` under :func:`sys.setprofile` and prints, for the Python calls whose caller
and callee are both in ``belief/decision/`` and lie in different files: the number of distinct
call edges (caller function → callee function), the files they reach, and how many edges go
back into a file the chain had already left (callee file ≠ caller file, and the callee file is
an ancestor of the caller on the stack).  A measure of how far the path from ``engine.decide``
into CVU jumps between modules.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    root = str(Path("belief/decision").resolve())
    edges: set[tuple[str, str]] = set()
    returns: set[tuple[str, str]] = set()
    files: set[str] = set()

    def rel(code) -> str:
        return str(Path(code.co_filename).resolve())[len(root) + 1:]

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = frame.f_code
        caller_frame = frame.f_back
        if caller_frame is None or not callee.co_filename.startswith(root):
            return
        caller = caller_frame.f_code
        if not caller.co_filename.startswith(root) or caller.co_filename == callee.co_filename:
            return
        a, b = rel(caller), rel(callee)
        files.update((a, b))
        edge = (f"{a}:{caller.co_name}", f"{b}:{callee.co_name}")
        edges.add(edge)
        f = caller_frame.f_back
        while f is not None:  # back into a file an outer caller is in?
            if f.f_code.co_filename == callee.co_filename:
                returns.add(edge)
                break
            f = f.f_back

    from belief.cli.main import main as cli_main

    argv = ["decide", sys.argv[1], "--out", sys.argv[2], *sys.argv[3:]]
    sys.setprofile(profile)
    try:
        cli_main(argv)
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    print(f"files in belief/decision/ reached by cross-file calls: {len(files)}")
    print(f"distinct cross-file call edges: {len(edges)}; back into a file already left: "
          f"{len(returns)}")


if __name__ == "__main__":
    main()
