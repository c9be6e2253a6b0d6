"""pytest fixtures of tests/sandbox; the helpers themselves live in jailtest.py."""

from jailtest import bombs_alone, built, outside, unpriv, ws  # noqa: F401
