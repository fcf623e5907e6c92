"""The manifest's capability type, alone so that a plugin's settings class can use it without the manifest models."""

from __future__ import annotations


class Capability(str):
    """A capability a piece of work needs ("gpu"); the manifest may write it as a list of one."""
