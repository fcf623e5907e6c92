"""Hostile manifests, generated: mutate a valid manifest and demand a clean refusal or a safe load.

Every mutated manifest must either be refused with a ManifestError whose message names a key
path (or, for a TOML syntax error, the line) in our own words, or load into something the
engine can use without touching anything outside the manifest directory. An internal error,
a traceback, Python's wording ("'int' object is not iterable") or a file written next to the
manifest directory fails the test.

The default example count keeps CI fast; set CRUCIBLE_HOSTILE_EXAMPLES=2000 to search harder
(it also switches from the fixed seed to fresh random ones).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from crucible_core.errors import CrucibleError, ManifestError
from crucible_core.manifest.loader import load_manifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.plugins import load_plugins
from crucible_core.run.check import check
from tests.cli_support import EXAMPLES, run_crucible

EXPLORE = os.environ.get("CRUCIBLE_HOSTILE_EXAMPLES")
SETTINGS = settings(
    max_examples=int(EXPLORE) if EXPLORE else 40,
    derandomize=not EXPLORE,  # CI: the same examples every run; exploring: fresh seeds
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# The counter example as data: a manifest known to load and pass check.
VALID: dict[str, Any] = {
    "repo": {"path": "."},
    "workspace": {
        "dir": "workspace",
        "setup_cmd": "mkdir -p workspace && cp value.txt bump.sh workspace/",
        "inject": ["measure.sh"],
        "carry_forward": ["build/"],
    },
    "agent": {
        "backend": "command",
        "agent_cmd": "./bump.sh",
        "goal": "Raise the integer in value.txt.",
        "turn_timeout": "5m",
        "env": {"CRUCIBLE_TEST_TOKEN": "not-a-secret"},
    },
    "judge": {
        "measure_cmd": "./measure.sh",
        "direction": "higher",
        "measure_timeout": 60,
        "selftest": {"good_cmd": "echo 4 > value.txt", "bad_cmd": "echo 1 > value.txt", "runs": 1},
    },
}


class Deep:
    """An array nested `depth` deep, emitted as text (building it as lists would itself recurse)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth


ODD_STRINGS = [
    "",
    ".",
    "..",
    "../..",
    "../../elsewhere",
    "/",
    "/etc/passwd",
    "value.txt",
    "state",
    "link-out",
    "a\0b",
    "\x1b]0;PWNED\x07\x1b[2J",
    "line\nbreak",
    "x" * 300,
    "y" * 20000,
    "A=B",
    "abc",
    "10s",
    "1h30m",
    "soon",
    "lower",
    "sideways",
]
ODD_NUMBERS: list[Any] = [
    0,
    -1,
    1,
    2**63 - 1,
    -(2**63),
    10**18,
    1e300,
    -1e300,
    math.inf,
    -math.inf,
    math.nan,
    -0.0,
    0.5,
]
KEYS = sorted({k for table in VALID.values() for k in table} | set(VALID) | {"directon", "measure", "deploy"})


def odd_values() -> st.SearchStrategy[Any]:
    scalar = st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.sampled_from(ODD_NUMBERS),
        st.booleans(),
        st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=30),
        st.integers(),
    )
    return st.one_of(
        scalar,
        st.builds(Deep, st.sampled_from([2, 50, 900, 5000])),
        st.lists(scalar, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), scalar, max_size=3),
    )


def locations(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path in the document (tables and leaves)."""
    for key, value in doc.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from locations(value, (*prefix, key))


def tables(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for key, value in doc.items():
        if isinstance(value, dict):
            yield from tables(value, (*prefix, key))


def parent_of(doc: dict[str, Any], where: tuple[str, ...]) -> dict[str, Any]:
    for key in where[:-1]:
        doc = doc[key]
    return doc


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["drop", "retype", "insert", "rename", "copy", "wrap"]))
        spots = list(locations(doc))
        if not spots:
            break
        where = draw(st.sampled_from(spots))
        holder = parent_of(doc, where)
        if where[-1] not in holder:
            continue
        if action == "drop":
            del holder[where[-1]]
        elif action == "retype":
            holder[where[-1]] = draw(odd_values())
        elif action == "insert":
            table = draw(st.sampled_from(list(tables(doc))))
            parent_of(doc, (*table, "_"))[draw(st.sampled_from(KEYS))] = draw(odd_values())
        elif action == "rename":  # a misspelling or a key moved to the wrong table
            value = holder.pop(where[-1])
            holder[draw(st.sampled_from(KEYS)) + draw(st.sampled_from(["", "s", "_"]))] = value
        elif action == "copy":  # the same key given again, in another table
            table = draw(st.sampled_from(list(tables(doc))))
            parent_of(doc, (*table, "_"))[where[-1]] = copy.deepcopy(holder[where[-1]])
        else:  # one table given as an array of tables, or a scalar as a one-element array
            holder[where[-1]] = [holder[where[-1]]]
    return doc


def toml_value(value: Any) -> str:
    if isinstance(value, Deep):
        return "[" * value.depth + "]" * value.depth
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are all valid TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(type(value))


def toml_document(doc: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(key)} = {toml_value(value)}\n" for key, value in doc.items())


def make_pack(root: Path) -> Path:
    pack = root / "pack"
    shutil.copytree(
        EXAMPLES / "counter", pack, ignore=shutil.ignore_patterns("workspace", "state", "crucible.toml")
    )
    (pack / "link-out").symlink_to(root.parent)
    return pack


KEY_PATH = re.compile(r"\[[A-Za-z_][\w.-]*\]|in the top level|line \d+|--state-dir")
PYTHON_WORDING = re.compile(
    r"Traceback|\b[A-Z]\w+(Error|Exception)\b|'\w+' object|has no attribute|not iterable|"
    r"not subscriptable|NoneType|<class"
)


def assert_clean_refusal(message: str) -> None:
    assert KEY_PATH.search(message), f"no key path in: {message}"
    assert not PYTHON_WORDING.search(message), f"Python wording in: {message}"
    assert "\n" not in message.strip(), "a refusal is one line"


PLUGINS = load_plugins()


@SETTINGS
@given(doc=mutated())
def test_a_mutated_manifest_is_refused_cleanly_or_loads_safely(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        sentinel = Path(tmp) / "outside.txt"
        sentinel.write_text("keep me\n")
        pack = make_pack(root)
        manifest = pack / "crucible.toml"
        manifest.write_text(toml_document(doc))
        try:
            loaded = load_manifest(manifest)
            paths = RunPaths.resolve(loaded)
        except ManifestError as exc:
            event(f"refused: {type(exc).__name__}")
            assert_clean_refusal(exc.render())
            return
        event("loaded")
        # It loaded: everything it names must sit where C-PATHS puts it.
        assert paths.workspace.is_relative_to(pack) and paths.workspace != pack
        assert not paths.state_dir.is_relative_to(paths.workspace)
        try:
            findings = check(PLUGINS, loaded)
        except CrucibleError as exc:
            assert_clean_refusal(exc.render())
        else:
            for level, text in findings.lines:
                assert not PYTHON_WORDING.search(text) or level != "fail", text
        # Nothing was written beside the manifest directory.
        assert sorted(p.name for p in root.iterdir()) == ["pack"]
        assert sentinel.read_text() == "keep me\n"
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["outside.txt", "root"]


def test_the_unmutated_manifest_loads_and_passes_check(tmp_path: Path) -> None:
    """The mutation base must be valid, or every refusal above would be for the wrong reason."""
    pack = make_pack(tmp_path)
    (pack / "crucible.toml").write_text(toml_document(VALID))
    findings = check(PLUGINS, load_manifest(pack / "crucible.toml"))
    assert not findings.failed, findings.lines


@pytest.mark.parametrize(
    ("mutation", "exit_code", "says"),
    [
        ({"workspace": {"dir": ".."}}, 10, "[workspace].dir = '..'"),
        ({"judge": {"measure_timeout": math.inf}}, 10, "[judge].measure_timeout"),
        ({"measure": {"x": 1}, "scope": {"y": 2}}, 16, "[measure], [scope]"),
        ({"deploy": {"forge_registry": "quay.io/x"}}, 10, "unknown key 'forge_registry' in [deploy]"),
    ],
)
def test_the_real_cli_refuses_with_one_line_and_the_documented_code(
    tmp_path: Path, mutation: dict[str, Any], exit_code: int, says: str
) -> None:
    doc = copy.deepcopy(VALID)
    for key, value in mutation.items():
        doc.setdefault(key, {}).update(value)
    pack = make_pack(tmp_path)
    (pack / "crucible.toml").write_text(toml_document(doc))
    done = run_crucible("check", "--manifest", pack / "crucible.toml")
    assert done.returncode == exit_code, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crucible: error: ") and says in lines[0], done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]
