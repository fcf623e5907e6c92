"""Folding decoded session events into a FlowModel: one pass, no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from crucible_core.contract.decide import INVALID, shown_decision
from crucible_core.contract.noise import note_with_margin
from crucible_core.contract.run_kind import UNDISPATCHED, TaskStanding, run_kind, task_verdict
from crucible_core.contract.wire import WIDE_DECIDED
from crucible_core.flow.figures import OUTPUT_CHARS as OUTPUT_CHARS
from crucible_core.flow.figures import output_text as output_text
from crucible_core.flow.model import (
    Candidate,
    FlowModel,
    Iteration,
    PlanTask,
    Resume,
    Rung,
    ToolCall,
    improvement_pct,
)

_EVIDENCE_STATUS = {"passed": "passed", "failed": "failed", "skipped": "skipped"}
_FINAL_TEXT_CHARS = 4000


class _Folder:
    def __init__(self) -> None:
        self.model = FlowModel()
        self.by_iter: dict[int, Iteration] = {}
        self.agent_iter: int | None = None
        self.phase_iter = 0
        self.phase = ""
        self.starts = 0
        self.pending_resume: Resume | None = None
        self.text_since_tool: list[str] = []
        self.main_rows: set[int] = set()
        self.first_gate: str | None = None  # the first start line's gate label: the run's kind
        self.plan_admitted = False
        self.active_s: float | None = None  # the summary's, for a run that writes no budget lines

    # -- helpers ------------------------------------------------------------------------
    def iteration(self, number: int) -> Iteration:
        it = self.by_iter.get(number)
        if it is None:
            it = Iteration(iter=number)
            if self.pending_resume is not None:
                it.resumed_before = True
                self.pending_resume.before_iter = number
                self.pending_resume = None
            self.by_iter[number] = it
        return it

    def _open_resume(self, recovery: str = "", detail: str = "") -> None:
        # A turn the dead predecessor left without a row is redone after the resume: drop it.
        for number in [n for n, it in self.by_iter.items() if it.decision == "pending"]:
            del self.by_iter[number]
        self.agent_iter = None
        if self.pending_resume is None:
            self.pending_resume = Resume(before_iter=0, recovery=recovery, detail=detail)
            self.model.resumes.append(self.pending_resume)
        else:
            self.pending_resume.recovery = recovery or self.pending_resume.recovery
            self.pending_resume.detail = detail or self.pending_resume.detail

    # -- events -------------------------------------------------------------------------
    def feed(self, event: Mapping[str, Any]) -> None:
        handler = getattr(self, "on_" + str(event["kind"]), None)
        if handler is not None:
            handler(event)

    def on_start(self, e: Mapping[str, Any]) -> None:
        h = self.model.header
        self.starts += 1
        if self.starts == 1:
            self.first_gate = str(e.get("gate") or "")
        if self.starts > 1 or e.get("resumed"):
            self._open_resume()
            self._reopen()
        h.goal = str(e.get("goal") or h.goal)
        h.gate = str(e.get("gate") or h.gate)
        h.model = str(e.get("model") or h.model)
        if e.get("direction") in ("lower", "higher"):
            h.direction = e["direction"]
        if isinstance(e.get("iters_total"), int) and e["iters_total"] > 0:
            h.iterations_planned = e["iters_total"]

    def on_identity(self, e: Mapping[str, Any]) -> None:
        identity = e.get("identity")
        if isinstance(identity, Mapping):
            self.model.header.identity = str(identity.get("digest") or "")
            if identity.get("direction") in ("lower", "higher"):
                self.model.header.direction = identity["direction"]
        elif isinstance(identity, str):
            self.model.header.identity = identity

    def on_recovery(self, e: Mapping[str, Any]) -> None:
        self._open_resume(str(e.get("class") or ""), str(e.get("detail") or ""))
        self._reopen()

    def _reopen(self) -> None:
        # A later process took the run up again: an earlier process's shutdown is not how it ended.
        self.model.header.outcome = "unfinished"
        self.model.header.reason = ""

    def on_segment(self, e: Mapping[str, Any]) -> None:
        if isinstance(e.get("baseline_score"), int | float):
            self.model.header.baseline = float(e["baseline_score"])

    def on_phase(self, e: Mapping[str, Any]) -> None:
        self.phase = str(e.get("phase") or "")
        if isinstance(e.get("iter"), int):
            self.phase_iter = e["iter"]

    @property
    def in_iteration(self) -> bool:
        return self.phase == "iteration" and self.phase_iter > 0

    def on_note(self, e: Mapping[str, Any]) -> None:
        if e.get("msg"):
            self.model.notes.append(str(e["msg"]))

    def on_agent_start(self, e: Mapping[str, Any]) -> None:
        number = e["iter"] if isinstance(e.get("iter"), int) else self.phase_iter
        self.agent_iter = number
        self.text_since_tool = []
        self.iteration(number)

    def on_agent_done(self, e: Mapping[str, Any]) -> None:
        self.agent_iter = None

    def on_agent(self, e: Mapping[str, Any]) -> None:
        event = e.get("event") or {}
        number = self.agent_iter
        if number is None:
            number = e["iter"] if isinstance(e.get("iter"), int) else self.phase_iter
            if number != getattr(self, "_loose_iter", None):
                self.text_since_tool = []
                self._loose_iter = number
        if number <= 0:
            return  # no agent turn on the baseline
        it = self.iteration(number)
        kind = event.get("kind")
        if kind == "tool":
            it.tools.append(ToolCall(str(event.get("name") or "?"), str(event.get("summary") or "")))
            self.text_since_tool = []
        elif kind == "text":
            it.text_events += 1
            self.text_since_tool.append(str(event.get("delta") or ""))
            it.final_text = "".join(self.text_since_tool)[-_FINAL_TEXT_CHARS:]
        elif kind == "result":
            it.agent_turns = int(event.get("turns") or 0)
            it.agent_cost = float(event.get("cost_usd") or 0.0)
            if event.get("is_error"):
                it.agent_error = str(event.get("error") or event.get("subtype") or "error")
            if event.get("text") and not it.final_text:
                it.final_text = str(event["text"])[-_FINAL_TEXT_CHARS:]
        elif kind == "error":
            it.agent_error = str(event.get("message") or event.get("error_type") or "error")

    def on_row(self, e: Mapping[str, Any]) -> None:
        row = e.get("row") or {}
        number = int(row.get("iter") or 0)
        decision = str(row.get("decision") or "")
        score = _number(row.get("score"))
        h = self.model.header
        wide = row.get("phase") == "wide"
        # A wide round before the deep loop writes its rows at iteration 0, beside the baseline.
        if decision == "baseline" or (number == 0 and not wide):
            if score is not None and h.baseline is None:
                h.baseline = score
            return
        if h.baseline is None:
            h.baseline = _number(row.get("baseline"))
        valid = row.get("valid")
        decision = shown_decision(decision, valid if isinstance(valid, bool) else None)
        note = str(row.get("note") or "")
        if decision == "discard":
            note = note_with_margin(
                note,
                score=score,
                best=_number(row.get("best")),
                margin=_number(row.get("margin")),
                direction=h.direction,
            )
        candidate = Candidate(
            decision=decision,
            score=score,
            note=note,
            detail=str(row.get("detail") or ""),
            diffstat=str(row.get("diffstat") or ""),
            diff=str(row.get("diff") or ""),
            kept_snap=row.get("kept_snap"),
            solved=bool(e.get("solved")),
        )
        it = self.iteration(number)
        for entry in row.get("evidence") or []:
            if isinstance(entry, Mapping) and all(r.name != entry.get("task") for r in it.ladder):
                status = _EVIDENCE_STATUS.get(str(entry.get("disposition")), str(entry.get("disposition")))
                it.ladder.append(Rung(str(entry.get("task") or "?"), status, str(entry.get("note") or "")))
        if wide:
            it.wide = True
            it.candidates.append(candidate)
            # A wide round's own rows are its candidates; when the iteration has no row of its
            # own, it shows the round's verdict (ours: the row that says the round was decided),
            # else the kept candidate, else the first one measured.
            verdict = str(row.get("note") or "").startswith(WIDE_DECIDED)
            if number not in self.main_rows and (it.decision == "pending" or is_kept(decision) or verdict):
                self._adopt(it, candidate)
        else:
            self.main_rows.add(number)
            self._adopt(it, candidate)

    def _adopt(self, it: Iteration, c: Candidate) -> None:
        it.decision = c.decision or "pending"
        it.score, it.note, it.detail, it.diffstat, it.diff = c.score, c.note, c.detail, c.diffstat, c.diff

    def on_task_result(self, e: Mapping[str, Any]) -> None:
        plan_version = int(e.get("plan_version") or 0)
        name = str(e.get("task") or "?")
        status = str(e.get("status") or "")
        number = e["iter"] if isinstance(e.get("iter"), int) else 0
        if plan_version == 0 and number > 0:
            secs = e.get("secs") if isinstance(e.get("secs"), int | float) else None
            self.iteration(number).ladder.append(Rung(name, status, str(e.get("note") or ""), secs))
            return
        # An iteration's own graph (a scored workflow) reports under that iteration; a run's plan
        # (a playbook, a plan file, crucible's re-plan) reports at iteration 0.
        plan = self.iteration(number).plan if number > 0 else self.model.plan
        task = next((t for t in plan if t.name == name), None)
        if task is None:
            task = PlanTask(name=name, kind=str(e.get("task_kind") or ""), plan_version=plan_version)
            plan.append(task)
        task.status = status or task.status
        task.note = str(e.get("note") or "")
        task.attempts = int(e.get("attempts") or task.attempts)
        task.cost_usd += float(e.get("cost_usd") or 0.0)
        task.secs = _number(e.get("secs")) or 0.0
        task.output = output_text(e.get("output"))

    def on_plan_admitted(self, e: Mapping[str, Any]) -> None:
        self.plan_admitted = True
        version = int(e.get("plan_version") or 0)
        # admitted while an iteration is under way: that iteration's graph, not the run's plan
        iteration = self.iteration(self.phase_iter) if self.in_iteration else None
        known = {t.name: t for t in (iteration.plan if iteration else self.model.plan)}
        tasks = []
        for spec in e.get("tasks") or []:
            if not isinstance(spec, Mapping):
                continue
            old = known.get(str(spec.get("name")))
            tasks.append(
                PlanTask(
                    name=str(spec.get("name") or "?"),
                    kind=str(spec.get("kind") or ""),
                    depends_on=[str(d) for d in spec.get("depends_on") or []],
                    required=bool(spec.get("required")),
                    stage=str(spec.get("stage") or ""),
                    status=old.status if old else "pending",
                    note=old.note if old else "",
                    attempts=old.attempts if old else 0,
                    cost_usd=old.cost_usd if old else 0.0,
                    secs=old.secs if old else 0.0,
                    output=old.output if old else "",
                    plan_version=version,
                )
            )
        if iteration is not None:
            iteration.plan = tasks
        else:
            self.model.plan = tasks

    def on_budget(self, e: Mapping[str, Any]) -> None:
        h = self.model.header
        h.spent_usd = float(e.get("spent") or 0.0)
        h.elapsed_secs = float(e.get("elapsed_secs") or 0.0)

    def on_summary(self, e: Mapping[str, Any]) -> None:
        if isinstance(e.get("best_score"), int | float):
            self.model.header.best = float(e["best_score"])
        self.active_s = _number(e.get("active_s"))

    def on_escalation(self, e: Mapping[str, Any]) -> None:
        self.model.header.escalation = f"{e.get('category') or ''}: {e.get('reason') or ''}".strip(": ")

    def on_shutdown(self, e: Mapping[str, Any]) -> None:
        self.model.header.outcome = str(e.get("outcome") or "")
        self.model.header.reason = str(e.get("reason") or "")

    # -- the end ----------------------------------------------------------------------------
    def finish(self) -> FlowModel:
        m, h = self.model, self.model.header
        h.kind = run_kind(started=self.starts > 0, gate=self.first_gate, plan_admitted=self.plan_admitted)
        if m.is_task_run:
            self._finish_tasks()
        m.iterations = [self.by_iter[n] for n in sorted(self.by_iter)]
        best = h.baseline
        for it in m.iterations:
            if is_kept(it.decision) and it.score is not None and _is_better(it.score, best, h.direction):
                best = it.score
            it.best = best
        for it in m.deep_iterations:
            # counted as the console counts: an invalid reading is one of the discarded
            h.kept += is_kept(it.decision)
            h.discarded += it.decision in ("discard", INVALID, "error")
            h.invalid += it.decision in (INVALID, "error")
        if h.best is None:
            h.best = best
        h.improvement_pct = improvement_pct(h.baseline, h.best, h.direction)
        m.resumes = [r for r in m.resumes if r.before_iter > 0 or r.recovery]
        return m

    def _finish_tasks(self) -> None:
        """A playbook's or a plan's verdict, spend and time, from its tasks (it writes no budget line)."""
        m, h = self.model, self.model.header
        outcome = None if h.outcome == "unfinished" else h.outcome
        h.verdict = task_verdict(
            (TaskStanding(t.required, t.stage, None if t.status == "pending" else t.status) for t in m.plan),
            outcome,
        )
        if outcome is not None:  # the run ended: a task with no result never will have one
            for task in m.plan:
                if task.status == "pending":
                    task.status = UNDISPATCHED
        if not h.spent_usd:
            h.spent_usd = round(sum(t.cost_usd for t in m.plan), 6)
        if not h.elapsed_secs and self.active_s is not None:
            h.elapsed_secs = self.active_s


def is_kept(decision: str) -> bool:
    """A decision that kept the candidate: `keep`, or a wide round's `wide-keep-N`."""
    return decision == "keep" or decision.startswith("wide-keep")


def _is_better(value: float | None, than: float | None, direction: str) -> bool:
    if value is None:
        return False
    if than is None:
        return True
    return value < than if direction == "lower" else value > than


def fold_flow(events: Iterable[Mapping[str, Any]]) -> FlowModel:
    folder = _Folder()
    for event in events:
        folder.feed(event)
    return folder.finish()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
