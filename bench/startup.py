"""Start-up: `crucible --help` and `crucible plugins` against bare interpreter starts, and what loading plugins imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness import Options, Row, median, timed

CRUCIBLE = Path(sys.executable).parent / "crucible"
HELP_TARGET = 1.3  # issue 27: `crucible --help` within 1.3x of importing click
# SDKs and clients a driver may use, which must never load just because plugins were loaded.
HEAVY = ("grpc", "kubernetes", "anthropic", "mcp", "openshell", "rich")

LOAD_EVERY_REGISTRY = (
    "from crucible_core.plugins import REGISTRATION_HOOKS, load_plugins\n"
    "p = load_plugins()\n"
    "[p.registry(kind) for kind in REGISTRATION_HOOKS]\n"
)


def _median_time(argv: list[str], reps: int) -> float:
    return median([timed(lambda: subprocess.run(argv, check=True, capture_output=True)) for _ in range(reps)])


def heavy_imports() -> list[str]:
    """Top-level packages among HEAVY that `python -X importtime` sees while plugins load."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", LOAD_EVERY_REGISTRY],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = set()
    for line in done.stderr.splitlines():
        if "|" not in line:
            continue
        module = line.rsplit("|", 1)[1].strip()
        top = module.split(".")[0]
        if top in HEAVY:
            seen.add(top)
    return sorted(seen)


def run(options: Options) -> list[Row]:
    reps = max(options.reps, 5)
    bare = _median_time([sys.executable, "-c", "pass"], reps)
    click = _median_time([sys.executable, "-c", "import click"], reps)
    help_s = _median_time([str(CRUCIBLE), "--help"], reps)
    plugins_s = _median_time([str(CRUCIBLE), "plugins"], reps)
    heavy = heavy_imports()
    return [
        Row("startup: crucible --help vs import click", help_s, click, target=HELP_TARGET),
        Row("startup: crucible --help vs bare python", help_s, bare),
        Row(
            "startup: crucible plugins vs bare python",
            plugins_s,
            bare,
            note=f"MISMATCH: loading plugins imported {', '.join(heavy)}"
            if heavy
            else "no heavy SDK imported",
        ),
    ]
