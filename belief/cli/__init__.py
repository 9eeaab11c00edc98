"""The ``belief`` command line: one module per command group (see :mod:`belief.cli.main`)."""
