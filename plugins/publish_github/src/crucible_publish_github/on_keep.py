"""Publish-on-keep: a run's kept work as ONE draft pull request, opened at the first keep and moved on
each later one, off the loop's critical path.

The run's own write outside the workspace ([publish], spec section 1.9), made from the lifecycle
hooks (see __init__.py). At the first kept commit the loop asks the mediation point to admit one
`draft-pr` write to `[publish].pr_repo`, exactly as a broker tool's write is admitted: one pull
request is one admitted write, and the updates that follow (a newer head pushed with a lease,
the body rewritten) are the same write and are not counted again. A refused write is an
`output_refused` event and a note; nothing is published for the rest of the run, which goes on.

The forge is never waited on by the loop: a keep only hands the newest kept commit to a
background worker (older ones it has not reached yet are skipped: the branch only ever needs the
newest). The worker reads the session log, renders the body (body.py), and calls the publisher.
At run end it gets a bounded time to finish (then a note says a resume finishes it).

What the worker did is kept in the run's private state (`publish_github/state.json`): the head
it last pushed, the head it is pushing, the pull request's URL. A resume reads it back and
republishes the newest kept commit when the record is behind the log; the publisher asks the
forge first (the branch's head, the open pull request for the branch), so a publish a kill
interrupted is finished without a second push of the same commit or a second pull request.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.api import CrucibleError, OutputRefused, PublishRequest

if TYPE_CHECKING:
    from crucible_core.api import Publisher, PublishSection

PUBLISH_SECONDS = 120.0  # one publish (lookups, push, pull request); a hung forge must not hold it forever
DRAIN_SECONDS = 30.0  # what run end waits for the worker before leaving the rest to a resume
OUTPUT_KIND = "draft-pr"
PUBLISHER_TOOL = "publish"  # the `tool` the mediation point records for these writes
STATE_FILE = "state.json"
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")

Admit = Callable[..., str | None]  # Mediator.admit
Note = Callable[[str, str], None]  # RunContext.note(text, level)
Emit = Callable[[Any], object]  # RunContext.emit


@attrs.define
class PublishState:
    """What the worker last did, in the run's private state (engine-written, so trusted)."""

    pushed: str | None = None  # the head this run's branch was last moved to
    pending: str | None = None  # a head a publish was under way with (a kill may have left it)
    url: str | None = None  # the pull request, once one exists

    @classmethod
    def load(cls, path: Path) -> PublishState:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict):
            return cls()
        fields = {k: v for k, v in data.items() if k in ("pushed", "pending", "url") and isinstance(v, str)}
        return cls(**fields)

    def save(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(attrs.asdict(self)))
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)


class Worker:
    """One background thread publishing the newest commit handed to it; the loop never waits on it."""

    def __init__(self, work: Callable[[str], None], name: str) -> None:
        self._work = work
        self._name = name
        self._ready = threading.Condition()
        self._wanted: str | None = None
        self._busy = False
        self._closing = False
        self._thread: threading.Thread | None = None

    def submit(self, sha: str) -> None:
        with self._ready:
            self._wanted = sha  # a newer keep replaces one not yet started
            if self._thread is None:
                # a daemon: a forge that hangs past the run's end must not keep the process alive
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._ready.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for everything submitted; True when it all finished."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()
            return self._ready.wait_for(lambda: self._wanted is None and not self._busy, timeout)

    def _run(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._wanted is not None or self._closing)
                if self._wanted is None:
                    return
                sha, self._wanted, self._busy = self._wanted, None, True
            try:
                self._work(sha)
            finally:
                with self._ready:
                    self._busy = False
                    self._ready.notify_all()


@attrs.define
class KeptPublisher:
    section: PublishSection
    publisher: Publisher
    admit: Admit
    note: Note
    run_id: str
    workspace: Path
    env: Mapping[str, str]
    session_log: Path
    state_dir: Path  # this plugin's directory under the run's private state
    emit: Emit = lambda event: None
    admitted: bool = False  # the run's one draft-pr write was admitted (this process or a recorded one)
    stopped: str | None = None  # the bound that stopped publishing, once one did
    # Set once run end stopped waiting: the session log is the engine's again, so a publish that
    # completes later keeps its private record but writes no event.
    ended: threading.Event = attrs.field(factory=threading.Event)
    worker: Worker = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.worker = Worker(self._publish, name=f"crucible-publish-{self.run_id}")

    @property
    def branch(self) -> str:
        return f"crucible/{self.run_id}"

    @property
    def state_path(self) -> Path:
        return self.state_dir / STATE_FILE

    def resume(self, events: list[Mapping[str, Any]]) -> None:
        """A resumed run: pick up the recorded admission or refusal, and finish a publish left behind."""
        from crucible_publish_github.body import RunStory

        for event in events:
            if event.get("tool") != PUBLISHER_TOOL or event.get("output_kind") != OUTPUT_KIND:
                continue
            if event.get("kind") == "output_admitted":
                self.admitted = True
            elif event.get("kind") == "output_refused":
                self.stopped = str(event.get("bound") or "recorded refusal")
        if not self.admitted or self.stopped is not None:
            return
        newest = RunStory.from_events(self.run_id, events).last_kept_sha
        state = PublishState.load(self.state_path)
        if newest is not None and (state.pending is not None or state.pushed != newest or state.url is None):
            self.note(f"finishing the publish of {newest[:12]} an earlier process left under way", "info")
            self.worker.submit(newest)

    def on_keep(self, iteration: int, sha: str) -> None:
        """Hand a kept commit to the worker (admitting the run's pull request at the first); never raises."""
        if self.stopped is not None:
            return
        if not self.admitted:
            try:
                self.admit(OUTPUT_KIND, self.section.pr_repo, by=PUBLISHER_TOOL, iteration=iteration)
            except OutputRefused as exc:
                self.stopped = exc.violation.bound
                self.note(
                    f"publish refused for iteration {iteration}: {exc.violation.message}; "
                    "this run publishes nothing",
                    "warn",
                )
                return
            self.admitted = True
        self.worker.submit(sha)

    def finish(self, timeout: float | None = None) -> None:
        """At run end: rewrite the body once more (the epilogue has run), then wait a bounded time."""
        if not self.admitted or self.stopped is not None:
            return
        from crucible_core.session_log import read_events
        from crucible_publish_github.body import RunStory

        # the log's newest keep, never what the worker happens to hold: a keep still queued is newer
        newest = RunStory.from_events(self.run_id, read_events(self.session_log)).last_kept_sha
        if newest is not None:
            self.worker.submit(newest)
        timeout = DRAIN_SECONDS if timeout is None else timeout
        finished = self.worker.drain(timeout)
        self.ended.set()
        if not finished:
            self.note(
                f"the draft pull request was still being published {timeout:g}s after the run ended; "
                "`crucible run --resume` finishes it",
                "warn",
            )

    # -- on the worker's thread ---------------------------------------------------------------

    def _say(self, text: str, level: str) -> None:
        if not self.ended.is_set():
            self.note(text, level)

    def _publish(self, sha: str) -> None:
        try:
            self._publish_once(sha)
        except CrucibleError as exc:
            self._say(f"publish of {sha[:12]} failed: {exc.render()}", "warn")
        except Exception as exc:  # a publisher's bug costs its publish, never the run
            self._say(f"publish of {sha[:12]} failed: {type(exc).__name__}: {exc}", "warn")

    def _publish_once(self, sha: str) -> None:
        from crucible_core.contract import wire
        from crucible_core.session_log import read_events
        from crucible_publish_github.body import RunStory, render_body

        story = RunStory.from_events(self.run_id, read_events(self.session_log))
        state = PublishState.load(self.state_path)
        lease = tuple(head for head in (state.pushed, state.pending) if head is not None)
        state.pending = sha
        state.save(self.state_path)  # the intent first: a kill from here on is finished by a resume
        record = getattr(self.section, "record", None)
        base_sha = story.base_commit if story.base_commit and _SHA.fullmatch(story.base_commit) else None
        request = PublishRequest(
            repo=self.section.pr_repo,
            base=self.section.base,
            branch=self.branch,
            sha=sha,
            workspace=self.workspace,
            title=_title(story.goal, self.run_id),
            body=render_body(story, record_uri=record if isinstance(record, str) else None),
            env=self.env,
            timeout=PUBLISH_SECONDS,
            lease=lease,
            base_sha=base_sha,
        )
        url = self.publisher.publish(request)
        first = state.url is None
        state.pushed, state.pending, state.url = sha, None, url
        state.save(self.state_path)
        kept = len(story.kept)
        if self.ended.is_set():
            return
        if first:
            name = self.section.pr_repo.split("/")[-1]
            self.emit(
                wire.PrLinks(
                    links=[wire.PrLinkWire(url=url, repo=self.section.pr_repo, name=name, branch=self.branch)]
                )
            )
            self.note(f"opened the run's draft pull request at {sha[:12]} ({kept} kept): {url}", "info")
        else:
            self.note(f"updated the run's draft pull request to {sha[:12]} ({kept} kept): {url}", "info")


def _title(goal: str, run_id: str) -> str:
    line = " ".join(goal.split())
    if len(line) > 72:
        line = line[:71] + "…"
    return f"crucible: {line}" if line else f"crucible run {run_id}"
