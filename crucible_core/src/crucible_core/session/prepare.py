"""Prepare: resolve a request into one lane before the session log opens.

The manifest (or plan file) is loaded with the run's plugins, the lane chosen by what it
declares (a playbook, or the loop), and the lane resolves everything it needs: names, identity
inputs, services planned from the catalog, task runners opened once, the resume classified, the
state lock taken. Any refusal here leaves the state directory without a log line. A resume of
a run that already ended is answered here too: nothing is written and no hook fires.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crucible_core.lanes.lane import Ending, Lane
from crucible_core.lanes.loop import prepare_loop
from crucible_core.lanes.plan_file import prepare_plan_file
from crucible_core.lanes.playbook import prepare_playbook
from crucible_core.manifest.loader import load_manifest
from crucible_core.plugins import Plugins
from crucible_core.run.state_lock import StateLock
from crucible_core.session.request import SessionRequest
from crucible_core.workflow.lanes import PLAYBOOK
from crucible_core.workflow.pack import declared_lane


def prepare(
    plugins: Plugins, request: SessionRequest, take_lock: Callable[[Path], StateLock]
) -> Lane | Ending:
    """The lane the request runs, ready to drive, or the Ending of a run that already ended."""
    if request.plan_file is not None:
        return prepare_plan_file(plugins, request, take_lock)
    assert request.manifest is not None
    loaded = load_manifest(request.manifest, plugins=plugins)
    if declared_lane(plugins, loaded) == PLAYBOOK:  # a scored lane runs the loop with its authored graph
        return prepare_playbook(plugins, request, loaded, take_lock)
    return prepare_loop(plugins, request, loaded, take_lock)
