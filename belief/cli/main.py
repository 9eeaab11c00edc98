"""The ``belief`` command line: the parser and the error handling of every command.

Command groups, one module each: :mod:`belief.cli.demo` (``demo``), :mod:`belief.cli.campaign`
(``replay``, ``manual``) and :mod:`belief.cli.statistician` (``fit``, ``check``, ``decide``,
``report``).  Refused input (:class:`~belief.errors.InputError`, its setting named as the
flag that set it, see :mod:`belief.cli.flags`) and an output path that cannot be written are
one line on stderr and exit code 2 (a flag typed under its deprecated name is named so, with
the flag that replaces it; a command that ran says so on stderr when it ends); Ctrl-C stops
the command and exits with 130 (128 + SIGINT) after saying what was kept.
"""

from __future__ import annotations

import argparse
import sys

from belief.errors import InputError

__all__ = ["EXIT_INPUT", "EXIT_INTERRUPT", "FAST_EXIT", "main", "run"]

EXIT_INPUT = 2
EXIT_INTERRUPT = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
FAST_EXIT = frozenset({"check", "decide", "report"})
"""Commands after which :func:`run` ends the process without the interpreter's teardown."""


class _Parser(argparse.ArgumentParser):
    """argparse with a refusal on one line (no usage block), exit code 2 as before."""

    def error(self, message: str):  # argparse calls it on a refused argument
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``belief`` parser with every command group registered."""
    from belief.cli.campaign import add_campaign_commands
    from belief.cli.demo import add_demo_command
    from belief.cli.statistician import add_statistician_commands

    parser = _Parser(prog="belief", description="Bayesian belief-state engine for sim-to-real "
                     "allocation under several budgets.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_demo_command(sub)
    add_campaign_commands(sub)
    add_statistician_commands(sub)  # fit, check, decide, report
    return parser


def main(argv: list[str] | None = None) -> int:
    from belief.cli.flags import RENAMED, as_flag, deprecation_notes

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except InputError as err:  # one line: a deprecated name used is said in it
        print(f"belief: error: {as_flag(err, args.command, renamed=getattr(args, RENAMED, None))}",
              file=sys.stderr)
        return EXIT_INPUT
    except (PermissionError, FileExistsError, NotADirectoryError, IsADirectoryError) as err:
        # the outputs are checked before any work; this is the net under a path that changed
        # while the command ran
        print(f"belief: error: cannot write {err.filename or ''}: {err.strerror or err}",
              file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        note = getattr(args, "interrupt_note", None)
        print("belief: interrupted (Ctrl-C)" + (f"; {note}" if note else
                                                 "; nothing was written"), file=sys.stderr)
        return EXIT_INTERRUPT
    for note in deprecation_notes(args):  # after the command: a refusal stays one line
        print(note, file=sys.stderr)
    return code


def run() -> None:
    """The ``belief`` executable: :func:`main` on ``sys.argv``, then exit with its code.

    After :data:`FAST_EXIT` commands — which write their files through
    :class:`belief.files.OutputSet` (committed, closed) and stop their figure worker before
    returning — the standard streams are flushed and the process ends with ``os._exit``: the
    interpreter's teardown of xarray, pandas and SciPy (≈ 0.1 s of a warm ``belief decide``)
    is skipped.  The exit is the normal one when exit handlers may matter: PyMC was imported
    (``--refit``: PyTensor cleans its compile folder at exit), a tracer or profiler is set
    (coverage, cProfile), or ``BELIEF_FAST_EXIT=0``.

    numba's LLVM optimisation level is 1 unless ``NUMBA_OPT`` is set: measured on the demo's
    models (``benchmarks/bench_cold_start.py``), a first compile takes 0.56× the time of the
    default level 3, and sampling 1.13× (gains) and 0.76× (execution risk) the time per
    effective draw.  (It is part of the compiled-model cache's key.)"""
    import os

    os.environ.setdefault("NUMBA_OPT", "1")  # before anything imports numba
    code = main()
    fast = (len(sys.argv) > 1 and sys.argv[1] in FAST_EXIT and "pymc" not in sys.modules
            and "coverage" not in sys.modules and sys.gettrace() is None
            and sys.getprofile() is None
            and os.environ.get("BELIEF_FAST_EXIT", "1").strip().lower()
            not in ("0", "false", "no", "off"))
    if fast:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away, a closed stream
            pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
