"""Taking back the access the engine needs to directories of a workspace it owns.

An agent running as the engine's user can `chmod 000` a directory of the workspace or `.git`
itself; every later listing, read or rename in it then fails with EACCES, and a rollback that
cannot read the tree cannot put it back either. Directory permissions are not part of what git
records, and the engine owns the workspace, so the owner's read, write and search bits are
simply given back. Only directories, only ones this user owns, never through a link. (Run as
root, none of this ever triggers: root is not refused.)
"""

from __future__ import annotations

import os
import stat

_OWNER = stat.S_IRWXU


def regain(path: bytes) -> bool:
    """Give this user rwx back on the directory `path` if it lacks them; True if it changed anything."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & _OWNER == _OWNER:
        return False
    os.chmod(path, stat.S_IMODE(st.st_mode) | _OWNER, follow_symlinks=False)
    return True


def regain_tree(root: bytes) -> list[bytes]:
    """Every directory under `root` (itself included, `.git` too) the owner cannot use fully,
    given back; returns the paths changed, relative to `root`. Costs one listing per directory:
    called only after a permission error, never on the normal path."""
    changed: list[bytes] = []
    pending = [b""]
    while pending:
        rel = pending.pop()
        full = root + b"/" + rel if rel else root
        if regain(full):
            changed.append(rel or b".")
        try:
            listing = os.scandir(full)
        except OSError:
            continue  # not ours, or gone: the operation that needs it will say so
        with listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(rel + b"/" + entry.name if rel else entry.name)
    return changed
