"""Redaction of handed-out values and secret shapes: glued prefixes, base64 at any alignment, line splits."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from crucible_core.redact import (
    ANY_SECRET_PATTERN,
    MASK,
    SECRET_ANCHORS,
    Redactor,
    may_hold_secret_shape,
    secret_patterns,
)
from tests.fresh_interpreter import json_printed_by

SECRET = "handed-out-value-91f2"


@pytest.fixture
def redactor() -> Redactor:
    r = Redactor()
    r.add([SECRET])
    return r


def test_letters_glued_in_front_of_a_key_shape_do_not_hide_it() -> None:
    text = Redactor().text("key=XXsk-ant-api03-abcdefghijklmnop0123 and 1ghp_" + "a" * 30)
    assert "sk-ant" not in text and "ghp_" not in text


@pytest.mark.parametrize("suffix", [b"", b"!", b" and what follows"])
@pytest.mark.parametrize("prefix", [b"", b"a", b"ab", b"some longer prefix "])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_forms_are_masked_at_every_alignment(
    redactor: Redactor, prefix: bytes, suffix: bytes, encode: Any
) -> None:
    blob = encode(prefix + SECRET.encode() + suffix).decode()
    masked = redactor.text(f"payload {blob} end")
    left, right = masked.removeprefix("payload ").removesuffix(" end").split(MASK)
    # no character that carries a bit of the value stays, nor the padding after it: what is left
    # is what the prefix and the suffix alone encode to
    start, end = len(prefix), len(prefix) + len(SECRET)
    assert blob.startswith(left) and len(left) <= 4 * start // 3
    assert blob.endswith(right) and len(blob) - len(right) >= -(-4 * end // 3)
    if not suffix:
        assert right == ""  # the padding went with the value's last characters


def test_a_value_split_over_lines_is_masked(redactor: Redactor) -> None:
    text = f"first {SECRET[:7]}\n{SECRET[7:15]}\r\n{SECRET[15:]} last"
    masked = redactor.text(text)
    assert masked == f"first {MASK} last"
    wrapped = base64.encodebytes(b"x" * 70 + SECRET.encode()).decode()  # MIME: 76 columns
    assert MASK in redactor.text(wrapped)


def test_engine_variables_named_or_shaped_like_secrets_are_values_to_mask() -> None:
    r = Redactor()
    r.add_engine_env(
        {"SERVICE_TOKEN": "plain-looking-value", "ODD": "XXsk-ant-api03-zzzzzzzzzzzz", "HOME": "/home/me"}
    )
    assert r.text("plain-looking-value /home/me") == f"{MASK} /home/me"
    blob = base64.b64encode(b"XXsk-ant-api03-zzzzzzzzzzzz").decode()
    assert MASK in r.text(blob)


# One text per secret shape (and its case-insensitive and multi-line variants), each of which
# the shape's own pattern finds.
SHAPED = [
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "sk-ant-api03-abcdefgh",
    "key sk-" + "a" * 20,
    "ghs_" + "b" * 20,
    "github_pat_" + "c" * 20,
    "xoxb-0123456789",
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "AIza" + "d" * 30,
    "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeK",
    "Authorization: BEARER abcdefghijklmnop",
    "API-KEY = 'abcdefghijk'",
    'PASSWORD":"hunter2hunter2',
]


def _every_shape_substituted(text: str) -> str:
    """What Redactor.text did before the combined search: every shape's substitution in turn."""
    for pattern in secret_patterns():
        if pattern.groups >= 2:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        else:
            text = pattern.sub(MASK, text)
    return text


def test_every_secret_shape_is_masked_behind_the_one_search_that_skips_clean_text() -> None:
    # Redactor.text skips its per-shape substitutions when one combined search finds no shape:
    # the combined search must find every shape, flags (case, dot-all) included.
    covered = {pattern.pattern for pattern in secret_patterns() for text in SHAPED if pattern.search(text)}
    assert covered == {pattern.pattern for pattern in secret_patterns()}
    for text in SHAPED:
        masked = Redactor().text(f"before {text} after")
        assert MASK in masked and masked == _every_shape_substituted(f"before {text} after"), text
    clean = {"kind": "task_result", "status": "pass", "secs": 0.25, "n": [1, None, True]}
    assert Redactor().obj(clean) == clean


def test_the_literals_looked_for_first_give_the_combined_searchs_answer_on_long_texts() -> None:
    # On a long ASCII text Redactor.text looks for each shape's literals before searching for
    # the shape: every match of a shape must hold one of its literals, in any case.
    for pattern, anchors in zip(secret_patterns(), SECRET_ANCHORS, strict=True):
        for text in SHAPED:
            for match in pattern.finditer(text):
                assert any(anchor in match.group(0).lower() for anchor in anchors), (pattern.pattern, text)
    filler = "the measure printed value=3 and the agent kept going; " * 8
    near_misses = ["a token count of 12", "the basic idea", "sk- alone", "eyJ short", "an api_key= x"]
    # one text per literal, which that literal alone announces: a literal left out is a shape missed
    per_literal = [
        *(f"{prefix}_{'e' * 20}" for prefix in ("ghp", "gho", "ghu", "ghs", "ghr")),
        *(f"xox{letter}-0123456789" for letter in "abprs"),
        "Basic abcdefghijklmnop",
        *(f"{name}: abcdefghijk" for name in ("x-api-key", "Authorization", "apikey", "api_key", "api-key")),
        *(f"{name}=abcdefghijk" for name in ("token", "secret", "password")),
    ]
    for text in per_literal:
        assert may_hold_secret_shape(f"{filler}{text}{filler}"), text
    for text in [*SHAPED, *per_literal, *(t.swapcase() for t in SHAPED), *near_misses, ""]:
        for padded in (f"{filler}{text}{filler}", f"{text}{filler}", f"{filler}{text}", f"é {filler}{text}"):
            expected = ANY_SECRET_PATTERN.search(padded) is not None
            assert may_hold_secret_shape(padded) is expected, padded
            assert (MASK in Redactor().text(padded)) is expected, padded


def test_a_value_added_later_is_masked_in_a_text_redacted_before() -> None:
    # Short texts are remembered as redacted: a value handed out later (a broker grant) must
    # still be masked in a text seen before it.
    r = Redactor()
    text = "grant=late-value-7f3a"
    assert r.text(text) == text and r.obj({text: [text]}) == {text: [text]}
    r.add(["late-value-7f3a"])
    assert r.text(text) == f"grant={MASK}"
    assert r.obj({text: [text]}) == {f"grant={MASK}": [f"grant={MASK}"]}


def test_clean_text_is_redacted_without_compiling_each_shape_or_loading_base64() -> None:
    """Each shape's own expression and the base64 forms are needed only when a text holds a shape
    or a value is handed out; a run that meets neither compiles and imports neither (start-up)."""
    found = json_printed_by(
        """
        import json, sys
        from crucible_core import redact
        r = redact.Redactor()
        r.add_engine_env({"HOME": "/home/someone", "PATH": "/usr/local/bin:/usr/bin:/bin" * 3, "LANG": "C"})
        clean = [r.text("iteration"), r.text("Raise the integer in value.txt as high as you can (target: 5).")]
        before = {"shapes": len(redact._compiled_shapes), "base64": "base64" in sys.modules}
        masked = r.text("the key is sk-ant-" + "a" * 30)
        r.add(["handed-out-value-91f2"])
        after = {"shapes": len(redact._compiled_shapes), "base64": "base64" in sys.modules}
        print(json.dumps({"before": before, "after": after, "clean": clean, "masked": masked}))
        """
    )
    assert found["before"] == {"shapes": 0, "base64": False}
    assert found["clean"] == ["iteration", "Raise the integer in value.txt as high as you can (target: 5)."]
    assert found["masked"] == f"the key is {MASK}"
    assert found["after"] == {"shapes": len(secret_patterns()), "base64": True}
