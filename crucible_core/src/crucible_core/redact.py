"""Redaction applied where evidence is written: secret values the engine handed out, and secret shapes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

MASK = "[REDACTED]"
# Values shorter than this are not treated as secrets: masking every "1" would destroy evidence.
MIN_SECRET_LENGTH = 6

# Shapes that are secrets wherever they appear, whoever produced them.
SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.S),
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),  # JWT
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{12,}"),
    re.compile(
        r"(?i)(x-api-key|authorization|api[_-]?key|token|secret|password)([\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{8,}"
    ),
)


@attrs.define
class Redactor:
    """Masks exact secret values and secret-shaped strings in text and in JSON-like objects."""

    _values: set[str] = attrs.field(factory=set)
    _exact: re.Pattern[str] | None = attrs.field(default=None, init=False)

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
        if fresh - self._values:
            self._values |= fresh
            # Longest first so a secret that contains another is masked whole.
            ordered = sorted(self._values, key=len, reverse=True)
            self._exact = re.compile("|".join(re.escape(v) for v in ordered))

    def add_env(self, env: Mapping[str, str]) -> None:
        self.add(env.values())

    def text(self, value: str) -> str:
        if self._exact is not None:
            value = self._exact.sub(MASK, value)
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
