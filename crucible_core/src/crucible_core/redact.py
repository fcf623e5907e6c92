"""Redaction applied where evidence is written: secret values the engine handed out, and secret shapes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from crucible_core.contract.records import value_methods

MASK = "[REDACTED]"
# Values shorter than this are not treated as secrets: masking every "1" would destroy evidence.
MIN_SECRET_LENGTH = 6

# A base64 fragment shorter than this is not masked: short runs of base64 occur in any text.
MIN_ENCODED_LENGTH = 8
# Engine environment variables whose values are secrets by their name, whatever their shape.
SECRET_ENV_NAME = re.compile(r"(?i)(secret|token|passw|api_?key|private_?key|access_?key|credential)")

# Shapes that are secrets wherever they appear, whoever produced them (source, flags). The
# distinctive prefixes match even with letters glued in front (`XXsk-ant-...`): a word boundary
# there would let a secret through by prepending a character.
_SECRET_SHAPES: tuple[tuple[str, int], ...] = (
    (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.S),
    (r"sk-ant-[A-Za-z0-9_\-]{8,}", 0),
    (r"\bsk-[A-Za-z0-9_\-]{20,}", 0),
    (r"gh[pousr]_[A-Za-z0-9]{20,}", 0),
    (r"github_pat_[A-Za-z0-9_]{20,}", 0),
    (r"xox[abprs]-[A-Za-z0-9\-]{10,}", 0),
    (r"AKIA[0-9A-Z]{16}(?![0-9A-Z])", 0),
    (r"AIza[0-9A-Za-z_\-]{30,}", 0),
    (r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", 0),  # JWT
    (r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{12,}", 0),
    (
        r"(?i)(x-api-key|authorization|api[_-]?key|token|secret|password)([\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{8,}",
        0,
    ),
)


def _scoped(source: str, flag_bits: int) -> str:
    """A pattern's `source` as an alternative of a larger expression, its flags scoped to itself."""
    flags = ""
    if source.startswith("(?i)"):
        source, flags = source[len("(?i)") :], "i"
    elif flag_bits & re.IGNORECASE:
        flags = "i"
    if flag_bits & re.DOTALL:
        flags += "s"
    return f"(?{flags}:{source})" if flags else f"(?:{source})"


# Whether any secret shape occurs at all: one search instead of a substitution per shape. Most
# strings written to a log (names, statuses, kinds) hold none, and a call per shape on each of
# them was most of what a session-log line cost to write.
ANY_SECRET_PATTERN = re.compile("|".join(_scoped(source, flags) for source, flags in _SECRET_SHAPES))

_compiled_shapes: tuple[re.Pattern[str], ...] = ()


def secret_patterns() -> tuple[re.Pattern[str], ...]:
    """Each secret shape as its own expression, compiled on first use.

    Only a text that holds some shape, or a long one holding a shape's literal, needs them: most
    runs never do, and compiling them cost every start about a millisecond.
    """
    global _compiled_shapes
    if not _compiled_shapes:
        _compiled_shapes = tuple(re.compile(source, flags) for source, flags in _SECRET_SHAPES)
    return _compiled_shapes


# For each shape, literal text every match of it contains, in lower case. The combined search
# above tries every alternative at every character, so on a long text (a prompt, a diff) it
# costs about 0.1 ms per kilobyte; finding these literals first costs a few microseconds, and a
# shape is searched for only when its literals are there. Sound for ASCII text only, where
# lowering the text is exact and `(?i)` matches nothing but ASCII letters' two cases.
SECRET_ANCHORS: tuple[tuple[str, ...], ...] = (
    ("-----begin",),
    ("sk-ant-",),
    ("sk-",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"),
    ("akia",),
    ("aiza",),
    ("eyj",),
    ("bearer", "basic"),
    ("x-api-key", "authorization", "apikey", "api_key", "api-key", "token", "secret", "password"),
)
_ALL_ANCHORS = tuple(anchor for anchors in SECRET_ANCHORS for anchor in anchors)
# Below this length the combined search is as cheap as looking for the literals.
_ANCHORS_FROM_LENGTH = 48


def may_hold_secret_shape(value: str) -> bool:
    """Whether some secret shape (secret_patterns()) occurs in `value`: ANY_SECRET_PATTERN's answer."""
    if len(value) < _ANCHORS_FROM_LENGTH or not value.isascii():
        return ANY_SECRET_PATTERN.search(value) is not None
    lowered = value.lower()
    for anchor in _ALL_ANCHORS:  # a plain loop: most long texts hold no shape's literal at all
        if anchor in lowered:
            break
    else:
        return False
    patterns = secret_patterns()
    return any(
        any(anchor in lowered for anchor in anchors) and patterns[shape].search(value) is not None
        for shape, anchors in enumerate(SECRET_ANCHORS)
    )


# One base64 character of either alphabet: what stands where a character mixes the value's bits
# with its neighbour's, and so is not known from the value alone.
_BASE64_CHAR = "[A-Za-z0-9+/_-]"


def _alignments(value: str) -> Iterator[tuple[str, bool, bool]]:
    """For each of the three alignments of `value` inside a base64 blob: the run of characters
    made of the value's bits alone, and whether a character mixing in a neighbour's bits stands
    before it and after it (that character still carries a few bits of the value)."""
    import base64  # only for a handed-out secret value: most runs hand out none

    raw = value.encode("utf-8")
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        end = shift + len(raw)
        first = -(-4 * shift // 3)  # the first character holding no bit of the bytes in front
        last = 4 * end // 3  # past the last character holding no bit of what follows
        fragment = encoded[first:last]
        if len(fragment) >= MIN_ENCODED_LENGTH:
            yield fragment, shift != 0, end % 3 != 0


def encoded_forms(value: str) -> Iterator[str]:
    """The base64 text a value becomes inside any base64 blob (standard and URL-safe alphabets).

    Where a value sits in the encoded data shifts its encoding by its offset modulo 3, so each
    of the three alignments yields the run of characters that depends on the value alone.
    """
    for fragment, _before, _after in _alignments(value):
        yield fragment
        yield fragment.replace("+", "-").replace("/", "_")


def _encoded_patterns(value: str) -> Iterator[str]:
    """Regular expressions masking every base64 character that carries a bit of `value`: its
    encoded forms plus the mixed character at each end and the padding after the last one."""
    for fragment, before, after in _alignments(value):
        for form in (fragment, fragment.replace("+", "-").replace("/", "_")):
            head = f"{_BASE64_CHAR}?" if before else ""
            tail = f"(?:{_BASE64_CHAR}={{0,2}})?" if after else ""
            yield head + re.escape(form) + tail


def _without_line_breaks(text: str) -> tuple[str, list[int]]:
    """The text with CR and LF removed, and for each kept character its index in the original."""
    kept = [i for i, char in enumerate(text) if char not in "\r\n"]
    return "".join(text[i] for i in kept), kept


_SCALARS = frozenset({int, float, bool, type(None)})
_MEMO_MAX_LENGTH = 64  # longer texts (notes, diffs, prompts) seldom recur
_MEMO_ENTRIES = 4096


@value_methods
@attrs.define(repr=False, eq=False)
class Redactor:
    """Masks exact secret values and secret-shaped strings in text and in JSON-like objects.

    A handed-out value is masked as written, in base64 (at any alignment, either alphabet, with
    the characters at its ends that carry only part of it), and split across lines inside one text.
    """

    _patterns: set[str] = attrs.field(factory=set)  # regular expressions, one per form of a value
    _exact: re.Pattern[str] | None = attrs.field(default=None, init=False)
    # Short texts as redacted under the current values: a log line's keys, kinds and statuses
    # recur on every line, and looking one up costs a tenth of redacting it again.
    _memo: dict[str, str] = attrs.field(factory=dict, init=False)

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
        patterns = {re.escape(v) for v in fresh} | {p for v in fresh for p in _encoded_patterns(v)}
        if patterns - self._patterns:
            self._patterns |= patterns
            # Longest first so a secret that contains another is masked whole.
            ordered = sorted(self._patterns, key=len, reverse=True)
            self._exact = re.compile("|".join(ordered))
            # A fresh memo, set after the pattern: a text redacted under the old values on another
            # thread (the broker's adds a value) lands in the old memo, which nobody reads again.
            self._memo = {}

    def add_env(self, env: Mapping[str, str]) -> None:
        self.add(env.values())

    def add_engine_env(self, env: Mapping[str, str]) -> None:
        """Secrets among the engine's own variables: named like one (API_KEY, *_TOKEN, ...) or
        shaped like one. Added as values, so their encoded and line-split forms are masked too."""
        self.add(
            v
            for k, v in env.items()
            if SECRET_ENV_NAME.search(k) or may_hold_secret_shape(v)  # any shape's search, in one
        )

    def _split_across_lines(self, value: str) -> str:
        joined, index = _without_line_breaks(value)
        if self._exact is None or len(joined) == len(value):
            return value
        spans = [(index[m.start()], index[m.end() - 1] + 1) for m in self._exact.finditer(joined)]
        for start, end in reversed(spans):
            value = value[:start] + MASK + value[end:]
        return value

    def text(self, value: str) -> str:
        if len(value) > _MEMO_MAX_LENGTH:
            return self._redacted(value)
        memo = self._memo  # taken before redacting: see add()
        found = memo.get(value)
        if found is None:
            found = self._redacted(value)
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            memo[value] = found
        return found

    def _redacted(self, value: str) -> str:
        if self._exact is not None:
            value = self._exact.sub(MASK, value)
            if "\n" in value or "\r" in value:
                value = self._split_across_lines(value)
        if not may_hold_secret_shape(value):
            return value
        for pattern in secret_patterns():
            if pattern.groups >= 2:
                value = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", value)
            else:
                value = pattern.sub(MASK, value)
        return value

    def obj(self, value: Any) -> Any:
        """Redact every string (keys included) inside a JSON-like structure."""
        kind = type(value)
        if kind in _SCALARS:  # the common leaves first: an ABC check per leaf adds up
            return value
        if kind is str or isinstance(value, str):
            return self.text(value)
        if kind is dict:
            return self._mapping(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.obj(v) for k, v in value.items()}
        if kind is list or isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value

    def _mapping(self, value: dict[Any, Any]) -> dict[str, Any]:
        """`obj` of a dict, with the memo looked up in line: a log line is a dict of short strings,
        and a call per key and per value was most of what redacting it cost."""
        memo = self._memo  # taken before redacting: see add()
        text = self.text
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = memo.get(k) if type(k) is str else None
            if key is None:
                key = text(str(k))
            kind = type(v)
            if kind in _SCALARS:
                out[key] = v
            elif kind is str:
                found = memo.get(v)
                out[key] = found if found is not None else text(v)
            else:
                out[key] = self.obj(v)
        return out
