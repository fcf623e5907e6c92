"""Writing a handful of objects as one git pack (.pack and .idx), without dulwich's indexer.

The kept record stores each keep's new objects this way: two files per keep, against one file
per object plus the fan-out directories they land in (creating a file or a directory costs the
kernel far more than writing a few kilobytes into one). The pack holds whole (not deltified)
objects, so writing it needs no reading back: the index is built from what was just written.

The pack file goes into place before its index, as git does: readers (git, dulwich) take a pack
only once its index is there, and by then the pack is whole. A kill leaves at worst a temporary
file (named `tmp_pack_*`, which no reader takes for a pack) or a pack without an index.
A pack is named by the objects it holds, and one whose name stands whole already (its index
there) is never written over: a reader may hold its index, and the new bytes need not match it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zlib
from collections.abc import Iterable, Iterator

from crucible_world_git.loose_objects import open_regular, place_new_file, write_all

# As for loose objects: these packs favour speed over size (they are consolidated later).
PACK_COMPRESSION = 1
_TYPE_NUMBERS = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_LARGE_OFFSET = 0x80000000
# No entry of these packs is this big: an object of loose_objects.STREAM_THRESHOLD (32 MiB) or
# more is never packed here, and zlib adds little to what it cannot compress. A bigger one is a
# pack someone else wrote under this module's name, and is not read into memory.
MAX_ENTRY_BYTES = 64 << 20
_INDEX_HEAD = 8 + 256 * 4  # the magic, the version and the fan-out table
# The names of the packs written here: only these are ever merged (consolidate()), never a pack
# the repository came with (a clone's deltified pack would grow many times over, written whole).
PREFIX = b"pack-crucible-"


class DamagedPack(ValueError):
    """A pack to merge does not hold what its index says (torn, or an entry's checksum differs):
    it is left as it is, so the damage stays where a reader's checks find it."""

    def __init__(self, base: bytes, why: str) -> None:
        super().__init__(f"{os.fsdecode(base)}.pack: {why}")
        self.base = base


def entry_header(kind: bytes, size: int) -> bytes:
    """A pack entry's header: its type and inflated size, little-endian base 128."""
    byte = (_TYPE_NUMBERS[kind] << 4) | (size & 15)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def write_pack(
    pack_dir: bytes, count: int, objects: Iterable[tuple[bytes, bytes, bytes]], *, durable: bool = False
) -> bytes:
    """Write `count` (raw id, kind, body) objects as one pack in `pack_dir`; return its path
    without the suffix.

    The caller hashed each body itself (its id is trusted as given). The objects are streamed
    to the file one at a time; only their ids, offsets and checksums stay in memory. With
    `durable`, the pack is on disk for sure (fsynced) when this returns (see merge_packs).
    """
    return _write_entries(
        pack_dir,
        count,
        (
            (sha, entry_header(kind, len(body)) + zlib.compress(body, PACK_COMPRESSION))
            for sha, kind, body in objects
        ),
        durable=durable,
    )


def merge_packs(pack_dir: bytes, bases: list[bytes], *, durable: bool = True) -> bytes:
    """Write the objects of the packs at `bases` (paths without the suffix, each written by
    write_pack) as one pack; return its path without the suffix. The old packs stay.

    With `durable`, the new pack is on disk for sure (fsynced) when this returns: the caller
    removes the merged packs next, which may hold kept history long on disk, and a machine
    crash must not find the new pack's names without its bytes.

    Their entries are copied as they are (each is a whole object, compressed on its own), one
    at a time: nothing is inflated or compressed again. Each is checked against the checksum
    its index holds for it first, as git does when it reuses packed data: the new pack gets a
    checksum of its own, which would otherwise vouch for a damaged entry. DamagedPack names a
    pack that fails (nothing is written then).
    """
    seen: set[bytes] = set()
    plan: list[tuple[bytes, list[tuple[bytes, int, int, int]]]] = []
    for base in bases:
        fresh = [entry for entry in _entries(base) if entry[0] not in seen]
        seen.update(sha for sha, _, _, _ in fresh)
        plan.append((base, fresh))

    def entries() -> Iterator[tuple[bytes, bytes]]:
        for base, fresh in plan:
            try:
                pack = open_regular(base + b".pack")  # never a link, never blocking on a FIFO
            except OSError as exc:
                raise DamagedPack(base, f"its pack cannot be read as a file ({exc.strerror})") from None
            fd = pack.fileno()
            try:
                for sha, start, end, crc in fresh:
                    if end - start > MAX_ENTRY_BYTES:
                        raise DamagedPack(base, f"object {sha.hex()} is larger than any entry written here")
                    chunk = os.pread(fd, end - start, start)
                    if len(chunk) != end - start:
                        raise DamagedPack(base, "shorter than its index says")
                    if zlib.crc32(chunk) != crc:
                        raise DamagedPack(base, f"object {sha.hex()} does not match its index's checksum")
                    if not 1 <= (chunk[0] >> 4) & 7 <= 4:
                        # A delta names its base by offset or id within its own pack: copied
                        # alone it would name nothing. Only a pack someone else wrote under
                        # this module's name holds one (the workspace's are the agent's to write).
                        raise DamagedPack(base, f"object {sha.hex()} is a delta, not a whole object")
                    yield sha, chunk
            finally:
                pack.close()

    return _write_entries(pack_dir, len(seen), entries(), durable=durable)


def _entries(base: bytes) -> list[tuple[bytes, int, int, int]]:
    """(raw id, start, end, crc32) of each entry of the pack at `base`, read from its version-2
    index; DamagedPack when the index is not one (torn, say) or the entries do not fit in the pack."""
    try:
        with open_regular(base + b".idx") as f:  # never a link, never blocking on a FIFO
            size = os.fstat(f.fileno()).st_size
            head = os.pread(f.fileno(), _INDEX_HEAD, 0)
            if head[:8] != b"\377tOc" + struct.pack(">I", 2) or size < _INDEX_HEAD + 40:
                raise DamagedPack(base, "its index is not a whole version-2 pack index")
            count = struct.unpack_from(">I", head, 8 + 255 * 4)[0]
            # What an index of `count` objects can hold at most (every offset a large one): a
            # bigger file is not read into memory.
            if size > _INDEX_HEAD + count * (20 + 4 + 4 + 8) + 40:
                raise DamagedPack(base, "its index is larger than the objects it counts")
            index = head + os.pread(f.fileno(), size - _INDEX_HEAD, _INDEX_HEAD)
    except OSError as exc:
        raise DamagedPack(base, f"its index cannot be read as a file ({exc.strerror})") from None
    names = _INDEX_HEAD
    crcs = names + count * 20
    offsets = crcs + count * 4
    large = offsets + count * 4
    if len(index) < large + 40:
        raise DamagedPack(base, "its index is shorter than the objects it counts")
    found = []
    try:
        for i in range(count):
            offset = struct.unpack_from(">I", index, offsets + i * 4)[0]
            if offset & _LARGE_OFFSET:
                offset = struct.unpack_from(">Q", index, large + (offset & ~_LARGE_OFFSET) * 8)[0]
            crc = struct.unpack_from(">I", index, crcs + i * 4)[0]
            found.append((offset, index[names + i * 20 : names + i * 20 + 20], crc))
    except struct.error:
        raise DamagedPack(base, "its index is shorter than the offsets it names") from None
    found.sort()
    try:
        pack_status = os.lstat(base + b".pack")
    except OSError as exc:
        raise DamagedPack(base, f"its pack cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(pack_status.st_mode):
        raise DamagedPack(base, "its pack is not a regular file")
    pack_end = pack_status.st_size - 20  # the trailing checksum
    ends = [offset for offset, _, _ in found[1:]] + [pack_end]
    entries = [(sha, start, end, crc) for (start, sha, crc), end in zip(found, ends, strict=True)]
    if any(not 12 <= start < end for _, start, end, _ in entries):  # 12: the pack's header
        raise DamagedPack(base, "shorter than its index says")
    return entries


def _write_entries(
    pack_dir: bytes, count: int, chunks: Iterable[tuple[bytes, bytes]], *, durable: bool = False
) -> bytes:
    """Write a pack of `count` (raw id, entry bytes) entries, then its index; see write_pack.
    With `durable`, both files and the directory are fsynced before this returns."""
    tmp, fd = _temporary(pack_dir)
    entries: list[tuple[bytes, int, int]] = []  # (raw id, offset, crc32 of the entry)
    try:
        header = b"PACK" + struct.pack(">II", 2, count)
        digest = hashlib.sha1(header)
        write_all(fd, header)
        offset = len(header)
        for sha, chunk in chunks:
            entries.append((sha, offset, zlib.crc32(chunk)))
            digest.update(chunk)
            write_all(fd, chunk)
            offset += len(chunk)
        if len(entries) != count:
            raise ValueError(f"a pack of {count} objects was given {len(entries)}")
        pack_sha = digest.digest()
        write_all(fd, pack_sha)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    entries.sort()
    ids = b"".join(sha for sha, _, _ in entries)
    base = pack_dir + b"/" + PREFIX + hashlib.sha1(ids).hexdigest().encode()
    if _whole(base):
        # These very objects are a pack already (a merge killed before it removed the packs it
        # merged, then merged again). Its bytes may differ (another order): writing it over,
        # .pack then .idx, left a new pack under the old index until the second rename.
        os.unlink(tmp)
        if durable:  # on disk for sure, as a new one would be, before the caller removes others
            for suffix in (b".pack", b".idx"):
                _fsync(base + suffix, os.O_NOFOLLOW)
            _fsync(pack_dir, os.O_DIRECTORY)
        return base
    os.replace(tmp, base + b".pack")
    index = _index(entries, pack_sha)
    tmp, fd = _temporary(pack_dir)
    place_new_file(fd, tmp, base + b".idx", [index], durable=durable)
    if durable:
        _fsync(pack_dir, os.O_DIRECTORY)
    return base


def _fsync(path: bytes, flags: int) -> None:
    """fsync the file or directory at `path`, opened read-only with `flags` added."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _whole(base: bytes) -> bool:
    """Whether a pack stands at `base` with its index (put in place last, so the pack is whole)."""
    try:
        return all(stat.S_ISREG(os.lstat(base + suffix).st_mode) for suffix in (b".pack", b".idx"))
    except FileNotFoundError:
        return False


def _index(entries: list[tuple[bytes, int, int]], pack_sha: bytes) -> bytes:
    """A version-2 pack index for sorted `entries`."""
    fanout = [0] * 256
    for sha, _, _ in entries:
        fanout[sha[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small: list[int] = []
    large: list[int] = []
    for _, offset, _ in entries:
        if offset < _LARGE_OFFSET:
            small.append(offset)
        else:
            small.append(_LARGE_OFFSET | len(large))
            large.append(offset)
    count = len(entries)
    out = b"".join(
        (
            b"\377tOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            b"".join(sha for sha, _, _ in entries),
            struct.pack(f">{count}I", *(crc for _, _, crc in entries)),
            struct.pack(f">{count}I", *small),
            struct.pack(f">{len(large)}Q", *large),
            pack_sha,
        )
    )
    return out + hashlib.sha1(out).digest()


def _temporary(pack_dir: bytes) -> tuple[bytes, int]:
    for _ in range(8):
        tmp = pack_dir + b"/tmp_pack_" + os.urandom(8).hex().encode()
        try:
            return tmp, os.open(tmp, _CREATE, 0o444)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {os.fsdecode(pack_dir)}")
