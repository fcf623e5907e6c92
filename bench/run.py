"""Run crucible's benchmarks and print one table of ratios against their baselines.

    python3 tasks.py bench --quick            # every benchmark, small sizes (a few minutes)
    python3 tasks.py bench                    # every benchmark, full sizes (says how long first)
    python3 tasks.py bench --only world       # one benchmark (repeatable)

Each benchmark is a module in bench/ named in BENCHMARKS, exposing `run(options) -> list[Row]`
and `estimate(options) -> float` (its expected seconds; see bench/harness.py and bench/README.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import DEFAULT_FILES, QUICK_FILES, QUICK_REPS, Options, Row, render  # noqa: E402

# Benchmark modules in bench/, in the order their rows are printed.
BENCHMARKS = [
    "world",
    "engine_overhead",
    "startup",
    "resume_fold",
    "plan_dag",
    "plan_stress",
    "broker",
    "wide",
]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"crucible_bench_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, {platform.system()}"


def failure_detail(exc: BaseException) -> str:
    """One line saying what failed: a command's exit status and the tail of its stderr."""
    if isinstance(exc, subprocess.CalledProcessError):
        command = " ".join(str(part) for part in exc.cmd) if isinstance(exc.cmd, list) else str(exc.cmd)
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        tail = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:])
        return f"`{command[:120]}` exited {exc.returncode}" + (f": {tail[:300]}" if tail else "")
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def prepared(name: str, options: Options) -> tuple[ModuleType, float] | Row:
    """A benchmark's module and its estimated seconds, or the FAILED row saying why it cannot run."""
    try:
        module = load(name)
        return module, float(module.estimate(options))
    except Exception as exc:
        return Row.failure(name, failure_detail(exc))


def run_one(module: ModuleType, name: str, options: Options) -> list[Row]:
    """A benchmark's rows, or one FAILED row naming what broke: a failed step is never a traceback."""
    try:
        rows: list[Row] = module.run(options)
        return rows
    except Exception as exc:
        return [Row.failure(name, failure_detail(exc))]


def duration(seconds: float) -> str:
    """A rough duration for a person: "40 s", "3 min", "1 h 5 min"."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def progress(row: Row) -> str:
    """One finished row as the run goes (the table at the end lines them up)."""
    if row.failed:
        return f"    {row.name}: {row.note}"
    verdict = f"  {row.verdict}" if row.verdict else ""
    return f"    {row.name}: {row.ratio:.2f}x{verdict}"


def run_all(names: list[str], options: Options, say: Callable[[str], None]) -> list[Row]:
    """Every named benchmark's rows, saying first how long the whole run should take and then
    each benchmark's rows as they finish, with the time left by the remaining estimates."""
    ready = {name: prepared(name, options) for name in names}
    estimates = {name: 0.0 if isinstance(got, Row) else got[1] for name, got in ready.items()}
    parts = ", ".join(f"{name} {duration(seconds)}" for name, seconds in estimates.items())
    say(f"estimated {duration(sum(estimates.values()))} on a 2-core machine ({parts})")
    rows: list[Row] = []
    began = time.monotonic()
    for n, (name, got) in enumerate(ready.items(), 1):
        say(f"[{n}/{len(ready)}] {name} (about {duration(estimates[name])}) ...")
        started = time.monotonic()
        found = [got] if isinstance(got, Row) else run_one(got[0], name, options)
        for row in found:
            say(progress(row))
        left = sum(estimates[later] for later in names[n:])
        after = f"; about {duration(left)} left" if left else ""
        say(f"    {name} took {duration(time.monotonic() - started)}{after}")
        rows += found
    say(f"all benchmarks took {duration(time.monotonic() - began)}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="run only this benchmark")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"small sizes and {QUICK_REPS} repetitions (files {', '.join(map(str, QUICK_FILES))}): "
        "a few minutes",
    )
    parser.add_argument(
        "--files",
        type=int,
        action="append",
        help=f"repository size in files (repeatable; default {', '.join(map(str, DEFAULT_FILES))})",
    )
    parser.add_argument(
        "--reps", type=int, help="timed repetitions; the median is reported (default 7, --quick 3)"
    )
    parser.add_argument("--workdir", type=Path, default=HERE.parent / ".bench", help="scratch directory")
    parser.add_argument("--keep", action="store_true", help="keep the scratch repositories")
    args = parser.parse_args(argv)

    files = QUICK_FILES if args.quick else DEFAULT_FILES
    reps = QUICK_REPS if args.quick else 7
    options = Options(
        files=tuple(args.files) if args.files else files,
        reps=max(1, args.reps if args.reps is not None else reps),
        workdir=args.workdir.resolve(),
        keep=args.keep,
        quick=args.quick,
    )
    options.workdir.mkdir(parents=True, exist_ok=True)
    rows = run_all(args.only or BENCHMARKS, options, lambda line: print(line, file=sys.stderr, flush=True))
    print(f"machine: {machine()}")
    print(f"median of {options.reps} repetitions per row (fewer where a benchmark caps them)\n")
    print(render(rows))
    failed = [row for row in rows if row.verdict in ("OVER", "FAILED") or row.note.startswith("MISMATCH")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
