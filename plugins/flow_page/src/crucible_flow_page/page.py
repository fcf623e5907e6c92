"""The flow model as one self-contained HTML page: inline CSS, JS and SVG, nothing fetched.

Every string from the log goes through html.escape; per-iteration details live in <template>
elements that the script clones on click, so no log text is ever parsed as script or markup.

A loop's page is its score chart and a column per iteration. A playbook's or a plan file's is
its task graph coloured by status (task_graph.py), each task's detail on click, and the table of
its tasks: such a run has no scores to chart.
"""

from __future__ import annotations

from html import escape

from crucible_core.api import (
    EPILOGUE,
    FlowModel,
    Iteration,
    PlanTask,
    counted,
    run_tally,
    verdict_word,
    versus_baseline,
)
from crucible_flow_page.task_graph import render_task_graph
from crucible_results_md.score_chart import ChartPoint, render_score_chart

# No network at all: the page may only use what it carries.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_TOOLS_SHOWN = 8
_OUTPUT_SHOWN = 160  # of a task's output in the table; its detail shows all the model holds

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:12px 20px;display:flex;flex-wrap:wrap;gap:8px 24px;align-items:baseline}
header h1{font-size:16px;margin:0;flex-basis:100%;font-weight:600}
header .kv{font-size:13px;opacity:.95}header .kv b{font-weight:600}
.outcome-solved,.outcome-finished,.verdict-pass{color:#7ee787}
.outcome-error,.outcome-escalated,.outcome-stalled,.verdict-fail{color:#ffa198}
header .muted{color:#afb8c1}
main{padding:12px 20px}section{margin-bottom:18px}h2{font-size:14px;margin:6px 0}
.chart{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px;display:inline-block}
.lane{display:flex;gap:8px;overflow-x:auto;padding-bottom:6px;align-items:stretch}
.col{flex:1 0 160px;max-width:240px;min-width:0;overflow:hidden;background:#fff;border:1px solid #d0d7de;border-top:4px solid #8c959f;
border-radius:6px;padding:8px;font-size:12px;cursor:pointer}
.col:hover,.col.selected{box-shadow:0 0 0 2px #0969da}
.col.keep{border-top-color:#1a7f37}.col.invalid,.col.error{border-top-color:#cf222e}.col.pending{border-top-color:#bf8700}
.col h3{font-size:13px;margin:0 0 4px;display:flex;justify-content:space-between}
.badge{font-size:11px;border-radius:10px;padding:0 6px;background:#eaeef2}
.keep .badge{background:#d1f0d8}.invalid .badge,.error .badge{background:#ffd8d3}
.note{overflow-wrap:anywhere}
.score{font-size:15px;font-weight:600}.muted{color:#57606a}
ul{margin:4px 0;padding-left:16px}li{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.resume{flex:0 0 26px;writing-mode:vertical-rl;background:#fff8c5;border:1px dashed #bf8700;border-radius:6px;
font-size:11px;text-align:center;padding:4px 2px}
.wide{display:flex;gap:4px}.cand{flex:1;border:1px solid #d0d7de;border-radius:4px;padding:2px 4px;font-size:11px}
.cand.keep{background:#d1f0d8}
table{border-collapse:collapse;font-size:12px;background:#fff}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}
.st-pass,.st-passed{color:#1a7f37}.st-fail,.st-failed,.st-blocked,.st-transport{color:#cf222e}
#detail{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px 14px;font-size:13px;min-height:40px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:6px;border-radius:4px;max-height:320px;overflow:auto}
.task-graph-box{overflow-x:auto;max-width:100%;box-sizing:border-box}.node{cursor:pointer}.node:focus{outline:none}
.node.selected rect,.node:hover rect{stroke:#0969da;stroke-width:2.5}
td.output{font-family:ui-monospace,monospace;max-width:420px;overflow-wrap:anywhere}
"""

# Clicking an element (`SELECTOR`) clones the template its `ATTR` names into #detail.
_SCRIPT_TEMPLATE = """
(function(){
  var detail=document.getElementById('detail');
  function show(col){
    var n=col.getAttribute('ATTR');
    var tpl=document.getElementById('PREFIX'+n);
    if(!tpl){return;}
    document.querySelectorAll('SELECTOR.selected').forEach(function(c){c.classList.remove('selected');});
    col.classList.add('selected');
    detail.replaceChildren(tpl.content.cloneNode(true));
    detail.setAttribute('ATTR',n);
  }
  document.querySelectorAll('SELECTOR').forEach(function(col){
    col.addEventListener('click',function(){show(col);});
    col.addEventListener('keydown',function(e){if(e.key==='Enter'||e.key===' '){show(col);}});
  });
})();
"""


def _script(selector: str, attr: str, prefix: str) -> str:
    return _SCRIPT_TEMPLATE.replace("SELECTOR", selector).replace("ATTR", attr).replace("PREFIX", prefix)


_SCRIPT = _script(".col", "data-iter", "detail-")  # the loop page: a column per iteration
_TASK_SCRIPT = _script(".node", "data-task", "task-")  # a task run's page: a box per task


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _duration(secs: float) -> str:
    secs = int(secs)
    hours, rest = divmod(secs, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s")


def chart_points(model: FlowModel) -> list[ChartPoint]:
    return [ChartPoint(it.iter, it.score, it.decision, it.best) for it in model.iterations]


def _title(it: Iteration) -> str:
    return "wide round" if it.iter == 0 else f"#{it.iter}"


def _counts(model: FlowModel) -> str:
    """Iterations and decisions, counted as the console counts them (the wide round is none)."""
    h = model.header
    done = len(model.deep_iterations)
    invalid = f" ({h.invalid} invalid)" if h.invalid else ""
    planned = f" of {h.iterations_planned}" if h.iterations_planned else ""
    return f"{done}{planned}; kept {h.kept}, discarded {h.discarded}{invalid}"


def _header(model: FlowModel) -> str:
    h = model.header
    kv = [
        (
            "outcome",
            f'<span class="outcome-{_e(h.outcome)}">{_e(h.outcome)}</span>'
            + (f' <span class="muted">({_e(h.reason)})</span>' if h.reason else ""),
        ),
        (
            "best",
            f"{_e(_num(h.best))} vs baseline {_e(_num(h.baseline))} "
            f"{_e(versus_baseline(h.baseline, h.best, h.direction))}",
        ),
        ("objective", f"{_e(h.gate or '-')}, {_e(h.direction)} is better"),
        ("iterations", _e(_counts(model))),
        ("spend", f"${h.spent_usd:.2f}"),
        ("duration", _e(_duration(h.elapsed_secs))),
    ]
    if h.model:
        kv.append(("model", _e(h.model)))
    if h.identity:
        kv.append(("identity", f"<code>{_e(h.identity)}</code>"))
    if h.escalation:
        kv.append(("escalation", _e(h.escalation)))
    goal = h.goal.strip().splitlines()[0] if h.goal.strip() else "crucible run"
    items = "".join(f'<span class="kv">{k}: <b>{v}</b></span>' for k, v in kv)
    return f'<header><h1 title="{_e(h.goal)}">{_e(goal)}</h1>{items}</header>'


def _column(model: FlowModel, it: Iteration) -> str:
    h = model.header
    parts = [
        f'<div class="col {_e(it.decision)}" data-iter="{it.iter}" tabindex="0" role="button" '
        f'aria-label="{_e(_title(it))}">',
        f'<h3><span>{_e(_title(it))}</span><span class="badge">{_e(it.decision)}</span></h3>',
        f'<div class="score">{_e(_num(it.score))}</div>',
        f'<div class="muted">vs baseline {_e(versus_baseline(h.baseline, it.score, h.direction) or "-")}'
        f" · best {_e(_num(it.best))}</div>",
    ]
    agent = f"{len(it.tools)} tool calls"
    if it.agent_turns:
        agent = f"{it.agent_turns} turns, " + agent
    if it.agent_cost:
        agent += f", ${it.agent_cost:.2f}"
    if it.wall_secs is not None:
        agent += f", {_duration(it.wall_secs)} wall"
    parts.append(f'<div class="agent">agent: {_e(agent)}</div>')
    if it.agent_error:
        parts.append(f'<div class="st-fail">agent error: {_e(it.agent_error[:120])}</div>')
    if it.tools:
        shown = "".join(
            f'<li title="{_e(t.summary)}"><b>{_e(t.name)}</b> {_e(t.summary[:60])}</li>'
            for t in it.tools[:_TOOLS_SHOWN]
        )
        more = (
            f'<li class="muted">+{len(it.tools) - _TOOLS_SHOWN} more</li>'
            if len(it.tools) > _TOOLS_SHOWN
            else ""
        )
        parts.append(f'<ul class="tools">{shown}{more}</ul>')
    if it.ladder:
        rungs = "".join(
            f'<li class="st-{_e(r.status)}" title="{_e(r.note)}">{_e(r.name)}: {_e(r.status)}</li>'
            for r in it.ladder
        )
        parts.append(f'<div class="muted">measure ladder</div><ul class="ladder">{rungs}</ul>')
    if it.wide:
        cands = "".join(
            f'<div class="cand {_e(c.decision)}" title="{_e(c.note)}">{_e(c.decision)}<br>{_e(_num(c.score))}</div>'
            for c in it.candidates
        )
        parts.append(f'<div class="muted">wide round</div><div class="wide">{cands}</div>')
    if it.plan:
        counts = counted(task.status for task in it.plan)
        parts.append(f'<div class="muted graph">graph tasks: {_e(counts)}</div>')
    if it.note:
        parts.append(f'<div class="note" title="{_e(it.note)}">{_e(it.note[:90])}</div>')
    parts.append("</div>")
    return "".join(parts)


def _detail(it: Iteration) -> str:
    heading = "Wide round" if it.iter == 0 else f"Iteration {it.iter}"
    rows = [f"<h2>{heading}: {_e(it.decision)} {_e(_num(it.score))}</h2>"]
    if it.note:
        rows.append(f"<p><b>note</b>: {_e(it.note)}</p>")
    if it.detail:
        rows.append(f"<p><b>detail</b>: {_e(it.detail)}</p>")
    rows.append(f"<p><b>diffstat</b>:</p><pre>{_e(it.diffstat or '(none recorded)')}</pre>")
    if it.diff:
        # the agent's text, escaped: a diff of an HTML file draws nothing and runs nothing here
        rows.append(f'<details><summary><b>diff</b></summary><pre class="diff">{_e(it.diff)}</pre></details>')
    if it.candidates:
        # in the order they were decided; each note names its candidate
        cand = "".join(
            f"<tr><td>{_e(c.decision)}</td><td>{_e(_num(c.score))}</td><td>{_e(c.note)}</td></tr>"
            for c in it.candidates
        )
        rows.append(f"<table><tr><th>decision</th><th>score</th><th>note</th></tr>{cand}</table>")
    if it.plan:
        rows.append(_plan_table(f"Plan tasks of iteration {it.iter}", it.plan))
    if it.tools:
        tools = "".join(f"<li><b>{_e(t.name)}</b> {_e(t.summary)}</li>" for t in it.tools)
        rows.append(f"<p><b>tool calls</b> ({len(it.tools)}):</p><ul>{tools}</ul>")
    rows.append(f"<p><b>the agent's final text</b>:</p><pre>{_e(it.final_text or '(none)')}</pre>")
    return f'<template id="detail-{it.iter}">{"".join(rows)}</template>'


def _plan_table(title: str, tasks: list[PlanTask], *, measures: bool = False) -> str:
    """A graph's tasks as a table; `measures` adds what a task run shows of each (stage, time,
    attempts, cost, output), which an iteration's graph leaves to its column."""
    head = "<th>task</th><th>kind</th><th>depends on</th><th>required</th><th>status</th><th>note</th>"
    if measures:
        head += "<th>stage</th><th>time</th><th>attempts</th><th>cost</th><th>output</th>"
    rows = "".join(
        f"<tr><td>{_e(t.name)}</td><td>{_e(t.kind)}</td><td>{_e(', '.join(t.depends_on))}</td>"
        f'<td>{"yes" if t.required else ""}</td><td class="st-{_e(t.status)}">{_e(t.status)}</td>'
        f"<td>{_e(t.note)}</td>"
        + (
            f"<td>{_e(t.stage)}</td><td>{_e(_task_time(t))}</td><td>{t.attempts}</td>"
            f'<td>${t.cost_usd:.4f}</td><td class="output">{_e(t.output[:_OUTPUT_SHOWN])}</td>'
            if measures
            else ""
        )
        + "</tr>"
        for t in tasks
    )
    return f"<h2>{_e(title)}</h2><table><tr>{head}</tr>{rows}</table>"


def _task_time(task: PlanTask) -> str:
    return f"{task.secs:.2f}s" if task.attempts else "-"


def _plan(model: FlowModel) -> str:
    """The run's own plan (a playbook, a plan file); an iteration's graph is in its detail."""
    if not model.plan:
        return ""
    version = max(t.plan_version for t in model.plan)
    title = "Plan tasks of the run" + (f" (plan version {version})" if version else "")
    return f'<section class="plan">{_plan_table(title, model.plan)}</section>'


def _task_header(model: FlowModel) -> str:
    """A task run's header: verdict and outcome first, then its tasks, spend and identity."""
    h = model.header
    verdict = verdict_word(h.kind, h.verdict)
    kv = [
        ("verdict", f'<span class="verdict-{_e(h.verdict or "none")}">{_e(verdict)}</span>'),
        # how dispatch stopped, uncoloured: `finished` says nothing of success, the verdict does
        ("outcome", _e(h.outcome) + (f' <span class="muted">({_e(h.reason)})</span>' if h.reason else "")),
        ("run", _e(f"{'playbook' if h.kind == 'playbook' else 'plan file'}, {run_tally(model)}")),
        ("spend", f"${h.spent_usd:.2f}"),
    ]
    if h.elapsed_secs:
        kv.append(("duration", _e(_duration(h.elapsed_secs))))
    if h.model:
        kv.append(("model", _e(h.model)))
    if h.identity:
        kv.append(("identity", f"<code>{_e(h.identity)}</code>"))
    first = h.goal.strip().splitlines()[0] if h.goal.strip() else f"crucible {h.kind}"
    items = "".join(f'<span class="kv">{k}: <b>{v}</b></span>' for k, v in kv)
    return f'<header><h1 title="{_e(h.goal)}">{_e(first)}</h1>{items}</header>'


def _task_detail(n: int, task: PlanTask) -> str:
    facts = [
        f"<b>kind</b> {_e(task.kind or '-')}",
        f"<b>stage</b> {_e(task.stage or '-')}",
        "required" if task.required else "advisory",
        f"<b>attempts</b> {task.attempts}",
        f"<b>time</b> {_e(_task_time(task))}",
        f"<b>cost</b> ${task.cost_usd:.4f}",
    ]
    if task.depends_on:
        facts.append(f"<b>depends on</b> {_e(', '.join(task.depends_on))}")
    return (
        f'<template id="task-{n}"><h2>Task {_e(task.name)}: {_e(task.status)}</h2>'
        f"<p>{' · '.join(facts)}</p>"
        f"<p><b>note</b>: {_e(task.note or '(none)')}</p>"
        f"<p><b>output</b>:</p><pre>{_e(task.output or '(none)')}</pre></template>"
    )


def _render_task_run(model: FlowModel) -> str:
    """The page of a playbook or a plan file: its graph coloured by status, a task's detail on
    click, and the table of every task."""
    h = model.header
    epilogue = sum(1 for t in model.plan if t.stage == EPILOGUE)
    title = h.goal.strip().splitlines()[0] if h.goal.strip() else h.kind
    graph_title = f"{len(model.plan) - epilogue} task(s) in the graph" + (
        f", {epilogue} in the epilogue" if epilogue else ""
    )
    graph = render_task_graph(model.plan, title=graph_title)
    version = max((t.plan_version for t in model.plan), default=0)
    table = _plan_table(
        "Tasks" + (f" (plan version {version})" if version else ""), model.plan, measures=True
    )
    return "".join(
        [
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>crucible flow: {_e(title[:80])}</title><style>{_CSS}</style></head><body>",
            _task_header(model),
            "<main>",
            f'<section><h2>Task graph</h2><div class="chart task-graph-box">'
            f"{graph if model.plan else '<p>no tasks admitted</p>'}</div></section>",
            '<section><div id="detail"><p class="muted">Click a task for its note and output.</p></div></section>',
            f'<section class="plan">{table}</section>',
            "".join(_task_detail(n, task) for n, task in enumerate(model.plan)),
            f"</main><script>{_TASK_SCRIPT}</script></body></html>\n",
        ]
    )


def render_html(model: FlowModel) -> str:
    if model.is_task_run:
        return _render_task_run(model)
    h = model.header
    resumes = {r.before_iter: r for r in model.resumes}
    lane: list[str] = []
    for it in model.iterations:
        mark = resumes.get(it.iter)
        if mark is not None:
            label = "resumed" + (f" ({mark.recovery})" if mark.recovery else "")
            lane.append(f'<div class="resume" title="{_e(mark.detail)}">{_e(label)}</div>')
        lane.append(_column(model, it))
    chart = render_score_chart(chart_points(model), baseline=h.baseline, direction=h.direction, width=720)
    title = h.goal.strip().splitlines()[0] if h.goal.strip() else "run"
    return "".join(
        [
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>crucible flow: {_e(title[:80])}</title><style>{_CSS}</style></head><body>",
            _header(model),
            "<main>",
            f'<section><h2>Score over iterations</h2><div class="chart">{chart}</div></section>',
            f'<section><h2>Iterations</h2><div class="lane">{"".join(lane) or "<p>no iterations</p>"}</div></section>',
            '<section><div id="detail"><p class="muted">Click an iteration for its diffstat, note and the '
            "agent's final text.</p></div></section>",
            _plan(model),
            "".join(_detail(it) for it in model.iterations),
            f"</main><script>{_SCRIPT}</script></body></html>\n",
        ]
    )
