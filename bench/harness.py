"""Shared pieces of the benchmark harness: the options every benchmark gets, rows, timing, the table."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import attrs

DEFAULT_FILES = (20_000, 100_000)
QUICK_FILES = (2_000,)  # `--quick`: one small repository
QUICK_REPS = 3


@attrs.frozen
class Options:
    """What `bench/run.py` passes to every benchmark's `run(options)`."""

    files: tuple[int, ...] = DEFAULT_FILES  # repository sizes, for benchmarks that have one
    reps: int = 7  # timed repetitions per measurement; the median is reported
    workdir: Path = Path(".bench")  # scratch space (git-ignored); each benchmark takes a subdirectory
    keep: bool = False  # leave scratch repositories behind for inspection
    # `--quick`: each benchmark runs its smaller variant (fewer iterations, tasks or log rows);
    # still both sides in the same run, so every row is still a ratio.
    quick: bool = False


@attrs.frozen
class Row:
    """One line of the table: crucible's time against the baseline's, measured in the same run."""

    name: str
    crucible_s: float
    baseline_s: float
    target: float | None = None  # the highest acceptable ratio, if the benchmark has a target
    note: str = ""
    failed: bool = False  # the benchmark could not run; `note` carries what went wrong

    @classmethod
    def failure(cls, name: str, detail: str) -> Row:
        return cls(name, 0.0, 0.0, None, f"FAILED: {detail}", failed=True)

    @property
    def ratio(self) -> float:
        return self.crucible_s / self.baseline_s if self.baseline_s > 0 else float("inf")

    @property
    def verdict(self) -> str:
        if self.failed:
            return "FAILED"
        if self.target is None:
            return ""
        return "ok" if self.ratio <= self.target else "OVER"


def compile_crucible() -> None:
    """Write bytecode for crucible's modules, as an install does, so a timed command starts the way an
    installed crucible starts: an editable checkout under PYTHONDONTWRITEBYTECODE=1 (this machine's
    setting) would otherwise compile every module it imports on every start."""
    root = Path(__file__).resolve().parents[1]
    sources = [root / "crucible_core" / "src", *sorted(root.glob("plugins/*/src"))]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *map(str, sources)], check=True, capture_output=True
    )


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def render(rows: list[Row]) -> str:
    header = ("benchmark", "crucible", "baseline", "ratio", "target", "")
    lines = [header]
    for row in rows:
        if row.failed:
            lines.append((row.name, "-", "-", "-", "-", row.note))
            continue
        lines.append(
            (
                row.name,
                f"{row.crucible_s * 1000:.1f} ms",
                f"{row.baseline_s * 1000:.1f} ms",
                f"{row.ratio:.2f}x",
                f"<= {row.target:.1f}x" if row.target is not None else "-",
                row.verdict + (f"  {row.note}" if row.note else ""),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        cells = [line[0].ljust(widths[0])] + [cell.rjust(widths[i]) for i, cell in enumerate(line[1:5], 1)]
        out.append("  ".join(cells) + ("  " + line[5] if line[5] else ""))
        if n == 0:
            out.append("  ".join("-" * w for w in widths[:5]))
    return "\n".join(out)
