"""The hello pack, tested with crucible's test kit: its own gate (score.sh) scores scripted turns.

The kit registers the pack's plugin and the command judge; the memory world and the scripted
agent stand in for git and greet.sh, so each turn's greetings are exactly the ones given here.
"""

import shutil
import tomllib
from pathlib import Path

import crucible_pack_hello
from crucible_testkit import CrucibleKit


def test_the_pack_is_registered_and_its_gate_solves_at_three(tmp_path: Path) -> None:
    kit = CrucibleKit(tmp_path / "hello", installed=["judge_command"])
    kit.register(crucible_pack_hello)
    pack = kit.registered("pack", "hello")
    shutil.copytree(pack, kit.root)  # what `crucible run --pack hello` copies
    sections = tomllib.loads((kit.root / "crucible.toml").read_text())
    sections["judge"]["kind"] = "command"
    sections["world"] = {"kind": "memory"}
    sections["agent"] = {"backend": "scripted", "goal": sections["agent"]["goal"]}

    done = kit.run(
        turns=[
            {"greetings.txt": "hello\nhola\n"},
            {"greetings.txt": "hello\nhola\nhola\n"},  # not distinct: no better
            {"greetings.txt": "hello\nhola\nbonjour\n"},
        ],
        manifest=sections,
        iterations=5,
    )

    assert [(row.decision, row.score, row.note) for row in done.rows] == [
        ("baseline", 1.0, "1 greetings"),
        ("keep", 2.0, "2 greetings"),
        ("discard", 2.0, "2 greetings"),
        ("keep", 3.0, "3 greetings"),
    ]
    assert (done.result.outcome, done.result.iterations) == ("solved", 3)
    assert (done.workspace / "greetings.txt").read_text().split() == ["hello", "hola", "bonjour"]
