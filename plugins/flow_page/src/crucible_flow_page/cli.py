"""`crucible flow`: render a run's session log as a flow model (.json), a graph (.dot, .mmd) or a page (.html)."""

from __future__ import annotations

from pathlib import Path

import click

from crucible_core.api import (
    UsageError,
    WorkspaceError,
    manifest_option,
    missing_log_hint,
    session_log_path,
    session_option,
    state_dir_option,
)


@click.command("flow")
@manifest_option
@state_dir_option
@session_option
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("flow.html"),
    show_default=True,
    help="Output file; its extension picks the rendering: .json, .dot, .mmd or .html "
    "(`crucible plugins` lists every installed one).",
)
@click.option(
    "--spans",
    "spans",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="An exported trace (JSON spans) that adds wall-clock per iteration.",
)
def command(
    manifest: Path, state_dir: Path | None, session: Path | None, out: Path, spans: Path | None
) -> None:
    """Explain a run: fold its session log into a flow model and render it.

    Reads only the session log (already redacted when it was written). The .html page is one
    self-contained file: open it in any browser, offline. Exit 12 when the extension names a
    rendering whose plugin is not installed, 64 for one nothing renders.
    """
    from crucible_core.api import fold_flow, load_plugins, plain, read_session
    from crucible_flow_page.renderers import renderer_for
    from crucible_flow_page.spans import apply_spans, load_spans

    render = renderer_for(load_plugins(), out)
    log = session_log_path(manifest, state_dir, session)
    if not log.is_file():
        raise WorkspaceError(f"no session log at {log}", hint=missing_log_hint(manifest, session))
    try:
        events = read_session(log)
    except OSError as exc:
        raise WorkspaceError(f"cannot read {log}: {exc.strerror}", hint="check its permissions") from exc
    if not events:
        raise UsageError(f"{log} holds no session events", hint="is this a crucible session log?")
    model = fold_flow(events)
    if spans is not None:
        apply_spans(model, load_spans(spans))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(model), encoding="utf-8")
    except OSError as exc:
        raise WorkspaceError(f"cannot write {out}: {exc.strerror}", hint="pick another --out") from exc
    h = model.header
    if model.is_task_run:
        from crucible_core.api import run_tally, verdict_word

        # the log's words: no escape sequence reaches the terminal
        what = f"{h.kind}: {run_tally(model)}, verdict {verdict_word(h.kind, h.verdict)}, outcome {plain(h.outcome)}"
    else:
        what = f"{len(model.deep_iterations)} iterations, outcome {h.outcome}"
    click.echo(f"wrote {out} ({what})")
