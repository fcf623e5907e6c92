"""Prepare: resolve a request into one lane before the session log opens.

The manifest is loaded with the run's plugins, the lane chosen by what it
declares (the loop, or the lane a plugin registers under its workflow type, such as a playbook),
and the lane resolves everything it needs: names, identity inputs, services planned from the
catalog, task runners opened once, the resume classified, the state lock taken. Any refusal here
leaves the state directory without a log line. A resume of a run that already ended is answered
here too: nothing is written and no hook fires.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crucible_core.lanes.lane import Ending, Lane, LaneContext, LaneSpec
from crucible_core.lanes.loop import prepare_loop
from crucible_core.manifest.loader import LoadedManifest, load_manifest
from crucible_core.plugins import Plugins
from crucible_core.run.state_lock import StateLock
from crucible_core.session.request import SessionRequest
from crucible_core.workflow.pack import declared_lane


def prepare(
    plugins: Plugins, request: SessionRequest, take_lock: Callable[[Path], StateLock]
) -> Lane | Ending:
    """The lane the request runs, ready to drive, or the Ending of a run that already ended."""
    if request.prepare_lane is not None:  # no manifest: the plugin command that asked prepares it
        return request.prepare_lane(plugins, request, take_lock)
    assert request.manifest is not None
    loaded = load_manifest(request.manifest, plugins=plugins)
    spec = registered_lane(plugins, loaded)
    if spec is not None:
        return spec.prepare(LaneContext(plugins, request, loaded, take_lock))
    return prepare_loop(plugins, request, loaded, take_lock)


def registered_lane(plugins: Plugins, loaded: LoadedManifest) -> LaneSpec | None:
    """The plugin lane the manifest's workflow type selects; None for the loop (no workflow, or a
    scored one: the loop runs its authored graph). A type no installed plugin registers is a
    PluginError naming the distribution to install."""
    lane = declared_lane(plugins, loaded)
    if lane is None:  # the loop; the workflow modules load only for a manifest with a [workflow]
        return None
    from crucible_core.workflow.lanes import SCORED_WORKFLOW_TYPES

    if lane in SCORED_WORKFLOW_TYPES:
        return None
    spec: LaneSpec = plugins.registry("lane").get(lane, where=f"{loaded.path} ([workflow].type)")
    return spec
