"""The environment variables that hold the forge token, in the order they are read.

Kept apart from `github.py` so the engine can learn which of its variables to withhold from
agent turns (every run asks) without importing the forge client and its HTTP modules.
"""

from __future__ import annotations

TOKEN_ENVS = ("GITHUB_TOKEN", "GH_TOKEN")
