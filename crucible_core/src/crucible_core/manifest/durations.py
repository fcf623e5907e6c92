"""The manifest's duration type, alone so that a driver's settings class can use it without the manifest models."""

from __future__ import annotations


class Seconds(float):
    """A duration in seconds; the manifest may write it as a number or as text like "90s", "1h30m"."""
