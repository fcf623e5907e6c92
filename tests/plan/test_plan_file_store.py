"""The plan's store of captured files: concurrent tasks publish their declared files side by side."""

from __future__ import annotations

import threading
from pathlib import Path

from crucible_core.plan.files import FileStore


def test_tasks_publishing_at_once_each_capture_their_files(tmp_path: Path) -> None:
    """Two isolated tasks finishing together: one's capture walks the store while the other's
    staging directory is written and renamed away; neither capture may fail for that."""
    store = FileStore(tmp_path / "files", max_bytes=64 << 20)
    failures: list[BaseException] = []

    def publish_often(task: str) -> None:
        root = tmp_path / task
        root.mkdir()
        names = [f"out/{task}-{n}.txt" for n in range(8)]
        (root / "out").mkdir()
        for name in names:
            (root / name).write_text(task)
        try:
            for _ in range(150):
                store.publish(task, root, names, None)
        except BaseException as exc:  # collected for the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=publish_often, args=(task,)) for task in ("iso", "side")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert [rel for rel, _ in store.captured("side")] == [f"out/side-{n}.txt" for n in range(8)]
    assert not list((tmp_path / "files").glob(".tmp-*"))  # no staging directory left behind
