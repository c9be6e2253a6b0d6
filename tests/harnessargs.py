"""Harness command lines for tests: the harness runs user code in the jail unless told
--no-jail, and the tests that are not about the jail run it outside, as they always did (the
jail's own tests, and those that compare verdicts in it and out of it, pass --jail)."""

from __future__ import annotations

from collections.abc import Sequence

# the harness's commands that run user code
JAILED_COMMANDS = ("evaluate", "pool", "baseline", "check-task", "profile-reference", "inspect")


def unjailed(args: Sequence[str]) -> list[str]:
    """``args`` (a command and its options) with --no-jail added where they name no jail."""
    args = list(args)
    if args and args[0] in JAILED_COMMANDS and "--jail" not in args and "--no-jail" not in args:
        args.insert(1, "--no-jail")
    return args
