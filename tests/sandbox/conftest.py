"""pytest fixtures of tests/sandbox; the helpers themselves live in jailtest.py."""

from jailtest import built, outside, unpriv, ws  # noqa: F401
