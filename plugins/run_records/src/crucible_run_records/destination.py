"""Where a run record goes: the `s3://` and `file://` addresses, parsed, and a store for each.

A record address names a folder: `s3://bucket[/prefix]` or `file:///abs/path`. Parsing is pure
and strict (a relative `file://` path, credentials or a query in the address, a `..` segment:
each refused with what to write instead). A store puts and reads bytes under relative keys of
its folder; neither store lets a key climb out of the folder, and the file store never follows a
symbolic link it finds below its root. The S3 store takes its credentials and endpoint from the
standard AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, ...) through boto3, and
nothing it is told about them is ever written anywhere.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

import attrs

from crucible_core.api import CrucibleError, ExitCode

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# S3's bucket naming rules (the common subset every S3-compatible server accepts).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SHAPE = "write s3://bucket[/prefix] or file:///absolute/path"
# Seconds one S3 request may take: a hung endpoint costs a write, never the run (see writer.py).
CONNECT_SECONDS = 5.0
READ_SECONDS = 10.0


class RecordAddressError(CrucibleError):
    """A run record address that is not `s3://bucket[/prefix]` or `file:///abs/path`."""

    exit_code = ExitCode.MANIFEST


class RecordStoreError(CrucibleError):
    """A record destination refused or failed a read or a write."""

    exit_code = ExitCode.REMOTE


@attrs.frozen
class RecordAddress:
    """A parsed record folder: an S3 bucket and key prefix, or an absolute local directory."""

    scheme: str  # "s3" or "file"
    bucket: str = ""  # s3 only
    parts: tuple[str, ...] = ()  # the prefix (s3) or the path (file), one segment each

    def child(self, name: str) -> RecordAddress:
        return attrs.evolve(self, parts=(*self.parts, *_segments(name, what=name)))

    def __str__(self) -> str:
        if self.scheme == "s3":
            return "s3://" + "/".join((self.bucket, *self.parts))
        return "file:///" + "/".join(self.parts)

    @property
    def path(self) -> Path:
        """The local directory of a `file://` address."""
        return Path("/", *self.parts)


def parse_address(text: str) -> RecordAddress:
    """The record folder `text` names, or RecordAddressError saying what to write instead."""
    split = urlsplit(text.strip())
    if split.query or split.fragment or "?" in text or "#" in text:
        raise RecordAddressError(f"record address {text!r} has a query or fragment", hint=_SHAPE)
    if split.scheme == "s3":
        if "@" in split.netloc or ":" in split.netloc:
            raise RecordAddressError(
                f"record address {text!r} carries credentials or a port",
                hint="credentials come from the standard AWS environment, the endpoint from "
                "AWS_ENDPOINT_URL; " + _SHAPE,
            )
        if not _BUCKET.fullmatch(split.netloc) or ".." in split.netloc:
            raise RecordAddressError(f"record address {text!r} names no valid bucket", hint=_SHAPE)
        return RecordAddress("s3", split.netloc, _segments(split.path, what=text))
    if split.scheme == "file":
        if split.netloc not in ("", "localhost"):
            raise RecordAddressError(
                f"record address {text!r} is a relative path (file://{split.netloc}...)",
                hint="file:// takes an absolute path: file:///abs/path",
            )
        if not split.path.startswith("/"):
            raise RecordAddressError(f"record address {text!r} is not an absolute path", hint=_SHAPE)
        parts = _segments(split.path, what=text)
        if not parts:
            raise RecordAddressError(f"record address {text!r} names the file system root", hint=_SHAPE)
        return RecordAddress("file", "", parts)
    raise RecordAddressError(f"record address {text!r} is neither s3:// nor file://", hint=_SHAPE)


def _segments(path: str, *, what: str) -> tuple[str, ...]:
    parts = tuple(p for p in path.split("/") if p)
    if any(p in (".", "..") or "\\" in p or "\x00" in p for p in parts):
        raise RecordAddressError(
            f"{what!r} has a '.' or '..' segment", hint="name plain folders only; " + _SHAPE
        )
    return parts


def safe_key(key: str) -> str:
    """`key` if it is a plain relative key (no leading /, no empty, . or .. segment), else ValueError."""
    parts = key.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\\" in key or "\x00" in key:
        raise ValueError(f"{key!r} is not a plain relative key")
    return key


class RecordStore(Protocol):
    """Bytes under relative keys of one record folder."""

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def keys(self) -> list[str]: ...


@attrs.define
class FileStore:
    """A record folder on a local (or mounted) file system; links below the root are never followed."""

    root: Path

    def put(self, key: str, data: bytes) -> None:
        target = self._inside(safe_key(key), create=True)
        handle, temp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(temp, 0o644)
            os.replace(temp, target)  # replaces a link at the target itself, never what it points to
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        target = self._inside(safe_key(key), create=False)
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def keys(self) -> list[str]:
        if not self.root.is_dir():
            return []
        found = []
        for folder, dirs, files in os.walk(self.root, followlinks=False):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in files:
                full = os.path.join(folder, name)
                if name.startswith(".part-") or not stat.S_ISREG(os.lstat(full).st_mode):
                    continue  # a link or a half-written file is not part of the record
                found.append(os.path.relpath(full, self.root).replace(os.sep, "/"))
        return sorted(found)

    def _inside(self, key: str, *, create: bool) -> Path:
        """The path of `key` below the root, refusing a symbolic link on the way."""
        here = self.root
        if create:
            here.mkdir(parents=True, exist_ok=True)
        *folders, name = key.split("/")
        for part in folders:
            here = here / part
            if here.is_symlink():
                raise RecordStoreError(f"{here} is a symbolic link: a record never follows one")
            if create:
                here.mkdir(exist_ok=True)
        return here / name


@attrs.define
class S3Store:
    """A record folder under a bucket's key prefix, through boto3."""

    bucket: str
    prefix: str  # "" or "a/b/" (ends with a slash)
    client: S3Client

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + safe_key(key), Body=data)

    def get(self, key: str) -> bytes:
        answer = self.client.get_object(Bucket=self.bucket, Key=self.prefix + safe_key(key))
        return answer["Body"].read()

    def keys(self) -> list[str]:
        found = []
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        for page in pages:
            for item in page.get("Contents", []):
                found.append(item["Key"][len(self.prefix) :])
        return sorted(found)


def s3_client(env: Mapping[str, str]) -> S3Client:
    """A boto3 S3 client from the standard AWS environment, with short timeouts and no retry storm."""
    import boto3
    from botocore.config import Config

    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(
        connect_timeout=CONNECT_SECONDS,
        read_timeout=READ_SECONDS,
        retries={"max_attempts": 1, "mode": "standard"},
    )
    session = boto3.session.Session(region_name=region)
    return session.client("s3", endpoint_url=env.get("AWS_ENDPOINT_URL") or None, config=config)


def open_store(address: RecordAddress, env: Mapping[str, str]) -> RecordStore:
    if address.scheme == "s3":
        prefix = "".join(part + "/" for part in address.parts)
        return S3Store(address.bucket, prefix, s3_client(env))
    return FileStore(address.path)
