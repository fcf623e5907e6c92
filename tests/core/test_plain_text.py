"""`plain` and `valid_text` against the expressions they stand for, on every character class they treat."""

from __future__ import annotations

import random
import re

from crucible_core.contract.plain_text import REPLACEMENT, plain, valid_text
from tests.fresh_interpreter import json_printed_by

# The filter as one substitution per step, as it was written before printable ASCII was passed
# over first and the expressions were compiled on first use: the answers must stay these.
_BEYOND_C0 = r"\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
CONTROLS = re.compile(rf"[\x00-\x1f{_BEYOND_C0}]")
CONTROLS_BUT_TAB = re.compile(rf"[\x00-\x08\x0a-\x1f{_BEYOND_C0}]")
LONE_SURROGATES = re.compile("[\ud800-\udfff]")


def reference(text: str, *, tabs: bool = False) -> str:
    controls = CONTROLS_BUT_TAB if tabs else CONTROLS
    return LONE_SURROGATES.sub(REPLACEMENT, controls.sub(" ", ESCAPES.sub("", text)))


# Every character the expressions name, their neighbours, escape-sequence parts and ordinary text.
ALPHABET = (
    [chr(c) for c in range(0x00, 0xA2)]
    + [chr(c) for c in (0x61B, 0x61C, 0x61D, 0x200A, 0x2010, 0x2027, 0x202F, 0x205F, 0x206A, 0xFEFE, 0xFEFF)]
    + [chr(c) for c in range(0x200B, 0x2010)]
    + [chr(c) for c in range(0x2028, 0x202F)]
    + [chr(c) for c in range(0x2060, 0x206A)]
    + ["\ud800", "\udbff", "\udc00", "\udfff", "\ud7ff", "\ue000", "é", "→", "😀"]
    + ["\x1b[", "\x1b]", "\x1b\\", "\x07", "31m", "0;2", "title", "ab c"]
)


def test_plain_and_valid_text_give_the_expressions_answers() -> None:
    rng = random.Random(27)
    texts = [*ALPHABET, "", "iteration", "value.txt", "a b\tc", "Raise the integer (target: 5)."]
    texts += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(20000)]
    for text in texts:
        assert plain(text) == reference(text), repr(text)
        assert plain(text, tabs=True) == reference(text, tabs=True), repr(text)
        assert valid_text(text) == LONE_SURROGATES.sub(REPLACEMENT, text), repr(text)
    assert plain(12.5) == "12.5" and plain(None) == "None"


def test_printable_ascii_is_filtered_without_compiling_an_expression() -> None:
    """Most of what a run prints is printable ASCII: the classes beyond ASCII (about a millisecond
    to compile) are compiled only when a text could hold what they match."""
    found = json_printed_by(
        """
        import json, re
        compiled = []
        original = re.compile
        re.compile = lambda *args: compiled.append(args[0]) or original(*args)
        from crucible_core.contract.plain_text import plain, valid_text
        clean = [plain("score 5 best 5 (+400%)"), plain("a b", tabs=True), valid_text("ok")]
        before = list(compiled)
        dirty = plain("x\\x1b[31my\\tz\\u202e")
        print(json.dumps({"before": before, "after": len(compiled), "clean": clean, "dirty": dirty}))
        """
    )
    assert found["before"] == []
    assert found["clean"] == ["score 5 best 5 (+400%)", "a b", "ok"]
    assert found["dirty"] == "xy z "
    assert found["after"] == 2  # the escapes and the controls (what is left is ASCII: no surrogate)
