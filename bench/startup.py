"""Start-up: `crucible --help` and `crucible plugins` against importing click, and what each imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness import Options, Row, compile_crucible, median, timed

CRUCIBLE = Path(sys.executable).parent / "crucible"
HELP_TARGET = 1.3  # issue 27: `crucible --help` within 1.3x of importing click
PLUGINS_TARGET = 2.0  # issue 27: `crucible plugins` within 2x of importing click
HEAVIEST = 8  # modules listed per command, by cumulative import time
# SDKs and clients a driver may use, which must never load just because plugins were loaded.
HEAVY = ("grpc", "kubernetes", "anthropic", "mcp", "openshell", "rich")

# The arguments of each command the bench looks into with `python -X importtime`.
COMMANDS = {"--help": ["--help"], "plugins": ["plugins"]}
# For the up-front estimate: one round of the four commands, and the two `-X importtime` runs.
# Measured on the shared 2-core machine (load about 12).
SECONDS_PER_ROUND = 1.8
SECONDS_IMPORTTIME = 2.0


def _median_time(argv: list[str], reps: int) -> float:
    return median([timed(lambda: subprocess.run(argv, check=True, capture_output=True)) for _ in range(reps)])


def import_times(args: list[str]) -> list[tuple[str, int, bool]]:
    """(module, cumulative microseconds, outermost) for every import one command makes, heaviest
    first. An outermost import counts the modules nested under it, so their figures add up."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(CRUCIBLE), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[tuple[str, int, bool]] = []
    for line in done.stderr.splitlines():
        fields = line.split("|")
        if len(fields) != 3 or not fields[1].strip().isdigit():
            continue  # the header, or whatever the command printed to stderr
        found.append((fields[2].strip(), int(fields[1]), not fields[2].startswith("   ")))
    return sorted(found, key=lambda item: -item[1])


def heaviest(times: list[tuple[str, int, bool]]) -> str:
    outermost = [(module, us) for module, us, top in times if top]
    return ", ".join(f"{module} {us / 1000:.0f} ms" for module, us in outermost[:HEAVIEST])


def heavy_sdks(times: list[tuple[str, int, bool]]) -> list[str]:
    """Top-level packages among HEAVY that the command imported."""
    return sorted({module.split(".")[0] for module, _, _ in times} & set(HEAVY))


def _reps(options: Options) -> int:
    return max(options.reps, 5)  # each round is cheap, and start-up times scatter


def estimate(options: Options) -> float:
    return _reps(options) * SECONDS_PER_ROUND + SECONDS_IMPORTTIME


def prepare() -> None:
    """Make the measured commands start the way an installed crucible starts: with bytecode for
    its modules (an editable checkout under PYTHONDONTWRITEBYTECODE=1 would compile every module on
    every start) and with the plugin index and the plugin-command cache written."""
    compile_crucible()
    for args in COMMANDS.values():
        subprocess.run([str(CRUCIBLE), *args], check=True, capture_output=True)


def run(options: Options) -> list[Row]:
    prepare()
    reps = _reps(options)
    samples: dict[str, list[float]] = {"bare": [], "click": [], "--help": [], "plugins": []}
    argvs = {
        "bare": [sys.executable, "-c", "pass"],
        "click": [sys.executable, "-c", "import click"],
        "--help": [str(CRUCIBLE), "--help"],
        "plugins": [str(CRUCIBLE), "plugins"],
    }
    for _ in range(reps):  # interleaved, so a change in the machine's load reaches every figure alike
        for name, argv in argvs.items():
            samples[name].append(_median_time(argv, 1))
    bare, click, help_s, plugins_s = (
        median(samples[name]) for name in ("bare", "click", "--help", "plugins")
    )
    times = {name: import_times(args) for name, args in COMMANDS.items()}
    heavy = heavy_sdks(times["plugins"])
    sdk_note = f"MISMATCH: loading plugins imported {', '.join(heavy)}" if heavy else "no heavy SDK imported"
    return [
        Row(
            "startup: crucible --help vs import click",
            help_s,
            click,
            target=HELP_TARGET,
            note=f"heaviest imports: {heaviest(times['--help'])}",
        ),
        Row(
            "startup: crucible plugins vs import click",
            plugins_s,
            click,
            target=PLUGINS_TARGET,
            note=f"{sdk_note}; heaviest imports: {heaviest(times['plugins'])}",
        ),
        Row("startup: crucible --help vs bare python", help_s, bare),
        Row("startup: crucible plugins vs bare python", plugins_s, bare),
    ]
