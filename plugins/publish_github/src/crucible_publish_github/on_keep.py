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

A composite publishes one pull request per component whose own domain declares [publish], once a
keep moved that component beyond its base (Target.of_component), each body linking the others.
A playbook keeps nothing turn by turn: at its end, a workspace holding commits beyond its base is
published as one pull request, and one without publishes nothing (publish_beyond_base).

What the worker did is kept in the run's private state (`publish_github/state*.json`, one per
pull request): the head
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
    from crucible_publish_github.body import EmbeddedArtifact, RunStory

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


@attrs.frozen
class Target:
    """One pull request a run publishes: the run's (component "") or one composite component's."""

    component: str  # "" for a single-domain run
    repo: str  # owner/name: the fork the pull request opens on
    base: str  # the branch to ask to merge into when no base commit can be pinned
    workspace: Path  # the repository holding the component's commits
    branch: str  # the run's own branch on that fork

    @classmethod
    def of_run(cls, run_id: str, section: PublishSection, workspace: Path) -> Target:
        return cls("", section.pr_repo, section.base, workspace, f"crucible/{run_id}")

    @classmethod
    def of_component(cls, run_id: str, name: str, section: PublishSection, workspace: Path) -> Target:
        return cls(name, section.pr_repo, section.base, workspace / name, f"crucible/{run_id}-{name}")

    @property
    def label(self) -> str:
        return self.component or self.repo.split("/")[-1]

    def state_file(self) -> str:
        return f"state-{self.component}.json" if self.component else STATE_FILE

    def part(self, token: str | None) -> str | None:
        """This target's commit in a composite's commit list (`left@<sha>,right@<sha>`, what a keep
        reports) or snapshot token (`composite:{...}`, the run's recorded base)."""
        if token is None or not self.component:
            return token
        from crucible_core.api import COMPONENTS_TOKEN_PREFIX, decode_components

        if token.startswith(COMPONENTS_TOKEN_PREFIX):
            return decode_components(token).get(self.component)
        for part in token.split(","):
            name, _, sha = part.partition("@")
            if name == self.component:
                return sha if _SHA.fullmatch(sha) else None
        return None


@attrs.define
class KeptPublisher:
    targets: tuple[Target, ...]
    publisher: Publisher
    admit: Admit
    note: Note
    run_id: str
    env: Mapping[str, str]
    session_log: Path
    state_dir: Path  # this plugin's directory under the run's private state
    emit: Emit = lambda event: None
    record: str | None = None  # the run record's address ([publish].record), linked from each body
    # the declared artifacts' embeds of the newest collection (set by the hooks, read by the worker)
    artifacts: tuple[EmbeddedArtifact, ...] = ()
    admitted: set[str] = attrs.field(factory=set)  # repos whose pull request the mediation point admitted
    stopped: str | None = None  # the bound that stopped publishing, once one did
    # Set once run end stopped waiting: the session log is the engine's again, so a publish that
    # completes later keeps its private record but writes no event.
    ended: threading.Event = attrs.field(factory=threading.Event)
    worker: Worker = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.worker = Worker(self._publish, name=f"crucible-publish-{self.run_id}")

    def state_path(self, target: Target) -> Path:
        return self.state_dir / target.state_file()

    def resume(self, events: list[Mapping[str, Any]]) -> None:
        """A resumed run: pick up the recorded admissions or refusal, and finish a publish left behind."""
        from crucible_publish_github.body import RunStory

        for event in events:
            if event.get("tool") != PUBLISHER_TOOL or event.get("output_kind") != OUTPUT_KIND:
                continue
            if event.get("kind") == "output_admitted":
                self.admitted.add(str(event.get("target") or ""))
            elif event.get("kind") == "output_refused":
                self.stopped = str(event.get("bound") or "recorded refusal")
        if not self.admitted or self.stopped is not None:
            return
        story = RunStory.from_events(self.run_id, events)
        newest = story.last_kept_sha
        if newest is None:
            return
        for target in self.targets:
            head = target.part(newest)
            state = PublishState.load(self.state_path(target))
            edited = (
                target.repo in self.admitted and head is not None and head != target.part(story.base_commit)
            )
            if edited and (state.pending is not None or state.pushed != head or state.url is None):
                self.note(f"finishing the publish of {newest[:12]} an earlier process left under way", "info")
                self.worker.submit(newest)
                return

    def on_keep(self, iteration: int, sha: str, base: str | None = None) -> None:
        """Hand a kept commit to the worker (admitting each pull request at its first keep); never raises."""
        if self.stopped is not None:
            return
        base = base or self._base()
        for target in self.targets:
            if target.repo in self.admitted or target.part(sha) in (None, target.part(base)):
                continue  # admitted already, or a component this keep did not edit
            try:
                self.admit(OUTPUT_KIND, target.repo, by=PUBLISHER_TOOL, iteration=iteration)
            except OutputRefused as exc:
                self.stopped = exc.violation.bound
                self.note(
                    f"publish refused for iteration {iteration}: {exc.violation.message}; "
                    "this run publishes nothing more",
                    "warn",
                )
                break
            self.admitted.add(target.repo)
        if self.admitted:
            self.worker.submit(sha)

    def _base(self) -> str | None:
        from crucible_core.api import read_events
        from crucible_publish_github.body import RunStory

        if len(self.targets) == 1 and not self.targets[0].component:
            return None  # a single run's keeps are all beyond its base
        return RunStory.from_events(self.run_id, read_events(self.session_log)).base_commit

    def publish_beyond_base(self, iterations: int) -> None:
        """A playbook at its end: publish each target whose workspace holds commits beyond its base.

        A playbook keeps nothing iteration by iteration; the comparison of each workspace's HEAD
        with the base it started from stands in for the loop's keeps (nothing beyond: nothing).
        """
        from crucible_core.api import read_events
        from crucible_publish_github.body import RunStory

        base = RunStory.from_events(self.run_id, read_events(self.session_log)).base_commit
        heads = {target.component: _head(target.workspace) for target in self.targets}
        if not any(target.component for target in self.targets):
            sha = heads[""]
        else:
            sha = ",".join(f"{name}@{head or '-'}" for name, head in heads.items())
        beyond = [
            target
            for target in self.targets
            if heads[target.component] is not None and heads[target.component] != target.part(base)
        ]
        if base is None or sha is None or not beyond:
            return  # no commits beyond the base: a playbook without a change publishes nothing
        self.on_keep(iterations, sha, base=base)

    def finish(self, timeout: float | None = None) -> None:
        """At run end: rewrite the bodies once more (the epilogue has run), then wait a bounded time."""
        if not self.admitted:
            return
        from crucible_core.api import read_events
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
            self._publish_all(sha)
        except CrucibleError as exc:
            self._say(f"publish of {sha[:12]} failed: {exc.render()}", "warn")
        except Exception as exc:  # a publisher's bug costs its publish, never the run
            self._say(f"publish of {sha[:12]} failed: {type(exc).__name__}: {exc}", "warn")

    def _publish_all(self, sha: str) -> None:
        """Each admitted target's pull request to `sha`; a composite's bodies link each other, so a
        pull request opened this round sends the ones already open through once more."""
        from crucible_core.api import read_events, wire
        from crucible_publish_github.body import RunStory

        story = RunStory.from_events(self.run_id, read_events(self.session_log))
        due = [
            t
            for t in self.targets
            if t.repo in self.admitted
            and t.part(sha) is not None
            and t.part(sha) != t.part(story.base_commit)
        ]
        opened = [t for t in due if self._publish_one(t, sha, story)]
        if opened and len(due) > 1:
            for target in due[:-1]:  # the last one was sent with every other's link already
                self._publish_one(target, sha, story)
        if opened and not self.ended.is_set():
            links = []
            for target in due:
                url = PublishState.load(self.state_path(target)).url
                if url is not None:
                    links.append(
                        wire.PrLinkWire(url=url, repo=target.repo, name=target.label, branch=target.branch)
                    )
            self.emit(wire.PrLinks(links=links))

    def _publish_one(self, target: Target, sha: str, story: RunStory) -> bool:
        """Publish one target; True when its pull request was opened by this call."""
        from crucible_publish_github.body import render_body

        head = target.part(sha)
        assert head is not None
        path = self.state_path(target)
        state = PublishState.load(path)
        lease = tuple(h for h in (state.pushed, state.pending) if h is not None and h != head)
        state.pending = head
        state.save(path)  # the intent first: a kill from here on is finished by a resume
        base = target.part(story.base_commit)
        siblings = [
            (other.label, url)
            for other in self.targets
            if other != target and (url := PublishState.load(self.state_path(other)).url) is not None
        ]
        request = PublishRequest(
            repo=target.repo,
            base=target.base,
            branch=target.branch,
            sha=head,
            workspace=target.workspace,
            title=_title(story.goal, self.run_id, target.component),
            body=render_body(
                story,
                record_uri=self.record,
                siblings=siblings,
                component=target.component,
                artifacts=self.artifacts,
            ),
            env=self.env,
            timeout=PUBLISH_SECONDS,
            lease=lease,
            base_sha=base if base and _SHA.fullmatch(base) else None,
        )
        url = self.publisher.publish(request)
        first = state.url is None
        state.pushed, state.pending, state.url = head, None, url
        state.save(path)
        what = "opened" if first else "updated"
        self._say(
            f"{what} the draft pull request of {target.label} at {head[:12]} ({len(story.kept)} kept): {url}",
            "info",
        )
        return first


def _head(workspace: Path) -> str | None:
    """The commit a workspace's repository is at, or None without one."""
    from dulwich.errors import NotGitRepository

    from crucible_world_git.engine_repo import open_repo

    try:
        with open_repo(workspace) as repo:
            return repo.head().decode("ascii")
    except (NotGitRepository, OSError, KeyError):
        return None


def _title(goal: str, run_id: str, component: str = "") -> str:
    line = " ".join(goal.split())
    if len(line) > 72:
        line = line[:71] + "…"
    title = f"crucible: {line}" if line else f"crucible run {run_id}"
    return f"{title} [{component}]" if component else title
