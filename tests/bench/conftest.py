"""The benchmarks are scripts in bench/, not a package: their directory goes on sys.path, as
bench/run.py puts it there, so a test imports their modules the way run.py loads them."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
