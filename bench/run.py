"""Run crucible's benchmarks and print one table of ratios against their baselines.

    python3 tasks.py bench                    # every benchmark, full sizes
    python3 tasks.py bench --files 2000       # a quick check on a small repository
    python3 tasks.py bench --only world       # one benchmark (repeatable)

Each benchmark is a module in bench/ named in BENCHMARKS, exposing `run(options) -> list[Row]`
(see bench/harness.py and bench/README.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import DEFAULT_FILES, Options, Row, render  # noqa: E402

# Benchmark modules in bench/, in the order their rows are printed.
BENCHMARKS = ["world", "engine_overhead", "startup", "resume_fold", "plan_dag", "broker", "wide"]


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


def run_one(name: str, options: Options) -> list[Row]:
    """A benchmark's rows, or one FAILED row naming what broke: a failed step is never a traceback."""
    try:
        return load(name).run(options)
    except Exception as exc:
        return [Row.failure(name, failure_detail(exc))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="run only this benchmark")
    parser.add_argument(
        "--files",
        type=int,
        action="append",
        help=f"repository size in files (repeatable; default {', '.join(map(str, DEFAULT_FILES))})",
    )
    parser.add_argument("--reps", type=int, default=7, help="timed repetitions; the median is reported")
    parser.add_argument("--workdir", type=Path, default=HERE.parent / ".bench", help="scratch directory")
    parser.add_argument("--keep", action="store_true", help="keep the scratch repositories")
    args = parser.parse_args(argv)

    options = Options(
        files=tuple(args.files) if args.files else DEFAULT_FILES,
        reps=max(1, args.reps),
        workdir=args.workdir.resolve(),
        keep=args.keep,
    )
    options.workdir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    for name in args.only or BENCHMARKS:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows += run_one(name, options)
    print(f"machine: {machine()}")
    print(f"median of {options.reps} repetitions per row\n")
    print(render(rows))
    failed = [row for row in rows if row.verdict in ("OVER", "FAILED") or row.note.startswith("MISMATCH")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
