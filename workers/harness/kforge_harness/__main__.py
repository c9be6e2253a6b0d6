"""Entry point: ``python -m kforge_harness SUBCOMMAND ...``."""

import sys

from kforge_harness.cli import main

sys.exit(main(sys.argv[1:]))
