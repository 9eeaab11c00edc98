"""``python -m belief.cli`` runs the command line."""

from belief.cli.main import run

run()
