"""The content conversions .gitattributes asks for (eol, text, filter drivers), through dulwich.

Most repositories have none, and then no file pays for them: the conversions are looked up
only when the repository has attributes or line-ending configuration at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from dulwich.config import Config
    from dulwich.filters import FilterBlobNormalizer
    from dulwich.repo import Repo

    from crucible_world_git.staged_tree import StagedTree

_ATTRIBUTES = b".gitattributes"


def _has_attributes_file(staged: StagedTree | None, worktree: Path) -> bool:
    if (worktree / ".gitattributes").exists():
        return True
    if staged is None:
        return False
    pending = [staged.root]
    while pending:
        node = pending.pop()
        if _ATTRIBUTES in node.files:
            return True
        pending.extend(node.dirs.values())
    return False


def _configured(config: Config, key: bytes) -> bool:
    try:
        config.get((b"core",), key)
    except KeyError:
        return False
    return True


class ContentFilters:
    """Converts file bytes to blob bytes on the way in, and back on the way out."""

    def __init__(self, normalizer: FilterBlobNormalizer) -> None:
        self._normalizer = normalizer

    @classmethod
    def for_repo(
        cls, repo: Repo, config: Config, staged: StagedTree | None
    ) -> ContentFilters | Literal[False]:
        """The filters of `repo`, or False when nothing would ever convert a file's content."""
        configured = any(_configured(config, key) for key in (b"autocrlf", b"eol"))
        info_attributes = (Path(repo.commondir()) / "info" / "attributes").exists()
        if not (configured or info_attributes or _has_attributes_file(staged, Path(repo.path))):
            return False
        return cls(repo.get_blob_normalizer(config))

    def to_blob(self, path: bytes, data: bytes) -> bytes:
        from dulwich.objects import Blob

        return self._normalizer.checkin_normalize(Blob.from_string(data), path).data

    def to_worktree(self, path: bytes, data: bytes) -> bytes:
        from dulwich.objects import Blob

        return self._normalizer.checkout_normalize(Blob.from_string(data), path).data
