"""``python -m belief.cli`` runs the command line."""

import sys

from belief.cli.main import main

sys.exit(main())
