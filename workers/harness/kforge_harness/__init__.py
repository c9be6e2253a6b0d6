"""kforge_harness: the trusted judge of kforge.

It builds a candidate, runs it in a separate runner process, checks its outputs against the
reference on fresh inputs drawn from a secret seed, times it against PyTorch eager and
torch.compile with the same code, and computes the reward. See ../README.md.
"""

HARNESS_VERSION = "0.1.0"
REWARD_VERSION = "cuda-agent-v1"
