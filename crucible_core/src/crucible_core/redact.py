"""Redaction applied where evidence is written: secret values the engine handed out, and secret shapes."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

MASK = "[REDACTED]"
# Values shorter than this are not treated as secrets: masking every "1" would destroy evidence.
MIN_SECRET_LENGTH = 6

# A base64 fragment shorter than this is not masked: short runs of base64 occur in any text.
MIN_ENCODED_LENGTH = 8
# Engine environment variables whose values are secrets by their name, whatever their shape.
SECRET_ENV_NAME = re.compile(r"(?i)(secret|token|passw|api_?key|private_?key|access_?key|credential)")

# Shapes that are secrets wherever they appear, whoever produced them. The distinctive
# prefixes match even with letters glued in front (`XXsk-ant-...`): a word boundary there
# would let a secret through by prepending a character.
SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.S),
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"github_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"xox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"AKIA[0-9A-Z]{16}(?![0-9A-Z])"),
    re.compile(r"AIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),  # JWT
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{12,}"),
    re.compile(
        r"(?i)(x-api-key|authorization|api[_-]?key|token|secret|password)([\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{8,}"
    ),
)


def encoded_forms(value: str) -> Iterator[str]:
    """The base64 text a value becomes inside any base64 blob (standard and URL-safe alphabets).

    Where a value sits in the encoded data shifts its encoding by its offset modulo 3, so each
    of the three alignments yields the run of characters that depends on the value alone.
    """
    raw = value.encode("utf-8")
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        first = (0, 2, 3)[shift]  # characters that still carry bits of the bytes in front
        last = (shift + len(raw)) // 3 * 4  # the final partial group depends on what follows
        fragment = encoded[first:last]
        if len(fragment) >= MIN_ENCODED_LENGTH:
            yield fragment
            yield fragment.replace("+", "-").replace("/", "_")


def _without_line_breaks(text: str) -> tuple[str, list[int]]:
    """The text with CR and LF removed, and for each kept character its index in the original."""
    kept = [i for i, char in enumerate(text) if char not in "\r\n"]
    return "".join(text[i] for i in kept), kept


@attrs.define
class Redactor:
    """Masks exact secret values and secret-shaped strings in text and in JSON-like objects.

    A handed-out value is masked as written, in base64 (at any alignment, either alphabet),
    and split across lines inside one text.
    """

    _values: set[str] = attrs.field(factory=set)
    _exact: re.Pattern[str] | None = attrs.field(default=None, init=False)

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
        fresh |= {form for v in fresh for form in encoded_forms(v)}
        if fresh - self._values:
            self._values |= fresh
            # Longest first so a secret that contains another is masked whole.
            ordered = sorted(self._values, key=len, reverse=True)
            self._exact = re.compile("|".join(re.escape(v) for v in ordered))

    def add_env(self, env: Mapping[str, str]) -> None:
        self.add(env.values())

    def add_engine_env(self, env: Mapping[str, str]) -> None:
        """Secrets among the engine's own variables: named like one (API_KEY, *_TOKEN, ...) or
        shaped like one. Added as values, so their encoded and line-split forms are masked too."""
        self.add(
            v
            for k, v in env.items()
            if SECRET_ENV_NAME.search(k) or any(pattern.search(v) for pattern in SECRET_PATTERNS)
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
        if self._exact is not None:
            value = self._exact.sub(MASK, value)
            if "\n" in value or "\r" in value:
                value = self._split_across_lines(value)
        for pattern in SECRET_PATTERNS:
            if pattern.groups >= 2:
                value = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", value)
            else:
                value = pattern.sub(MASK, value)
        return value

    def obj(self, value: Any) -> Any:
        """Redact every string (keys included) inside a JSON-like structure."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value
