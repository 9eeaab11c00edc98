"""The ``belief`` command line: the parser and the error handling of every command.

Command groups, one module each: :mod:`belief.cli.demo` (``demo``), :mod:`belief.cli.campaign`
(``replay``, ``manual``) and :mod:`belief.cli.statistician` (``fit``, ``check``, ``decide``,
``report``).  Refused input (:class:`~belief.errors.InputError`) is one line on stderr and exit
code 2.
"""

from __future__ import annotations

import argparse
import sys

from belief.errors import InputError

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``belief`` parser with every command group registered."""
    from belief.cli.campaign import add_campaign_commands
    from belief.cli.demo import add_demo_command
    from belief.cli.statistician import add_statistician_commands

    parser = argparse.ArgumentParser(prog="belief", description="Bayesian belief-state engine "
                                     "for sim-to-real allocation under several budgets.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_demo_command(sub)
    add_campaign_commands(sub)
    add_statistician_commands(sub)  # fit, check, decide, report
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as err:
        print(f"belief: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
