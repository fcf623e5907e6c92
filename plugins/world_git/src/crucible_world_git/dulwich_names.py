"""Ref names and object ids (hex and binary) as dulwich's type hints spell them.

Newer dulwich releases declare ref names (`Ref`) and hex object ids (`ObjectID`) as NewTypes
over bytes; older releases, which this plugin still supports, take plain bytes. These helpers
mark a bytes value for the type checker and cost nothing at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from dulwich.objects import ObjectID, RawObjectID
    from dulwich.refs import Ref


def ref(name: bytes) -> Ref:
    """A ref name such as b"HEAD" or b"refs/heads/main"."""
    return cast("Ref", name)


def object_id(sha: bytes) -> ObjectID:
    """A hex object id (40 ASCII bytes for SHA-1)."""
    return cast("ObjectID", sha)


def raw_object_id(sha: bytes) -> RawObjectID:
    """A binary object id (20 bytes for SHA-1), as pack indexes hold them."""
    return cast("RawObjectID", sha)
