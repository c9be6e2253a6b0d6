"""Entry point: ``python -m kforge_harness SUBCOMMAND ...``."""

import os
import sys

from kforge_harness.cli import main

rc = main(sys.argv[1:])
# The answer is written; skip the interpreter's orderly teardown (a second or more once PyTorch
# and a CUDA context are loaded). Every file and child the commands own is closed by then.
sys.stdout.flush()
sys.stderr.flush()
os._exit(rc)
