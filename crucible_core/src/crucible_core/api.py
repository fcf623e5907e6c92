"""The public plugin API: the one core module a plugin, an example or an embedding program imports.

Everything a plugin author may rely on is named here, grouped the way docs/plugins.md ("The public
API") documents it. Names not listed here are core's private business and may change in any
release; a name listed here keeps its meaning until API_VERSION's major part changes, and is
deprecated for one minor release before it goes.

Names resolve lazily (PEP 562): importing this module costs nothing until a name is used, so a
plugin that imports it at module level does not slow `crucible --help`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

# Version of this surface, independent of the distribution's version: the major part changes
# when a listed name is removed or changes meaning, the minor part when names are added or
# deprecated.
API_VERSION = "3.6"

if TYPE_CHECKING:
    from crucible_core import process, toml_text
    from crucible_core.agent_files import (
        MAX_MARKER_BYTES as MAX_MARKER_BYTES,
    )
    from crucible_core.agent_files import (
        MAX_MARKER_DEPTH as MAX_MARKER_DEPTH,
    )
    from crucible_core.agent_files import (
        AgentFileRefused as AgentFileRefused,
    )
    from crucible_core.agent_files import DirectoryWatch as DirectoryWatch
    from crucible_core.agent_files import (
        load_json as load_json,
    )
    from crucible_core.agent_files import (
        read_regular as read_regular,
    )
    from crucible_core.artifacts import EMBED_MAX_BYTES as EMBED_MAX_BYTES
    from crucible_core.artifacts import UPLOAD_MAX_BYTES as UPLOAD_MAX_BYTES
    from crucible_core.artifacts import Collected as Collected
    from crucible_core.artifacts import CollectedArtifact as CollectedArtifact
    from crucible_core.artifacts import collect_artifacts as collect_artifacts
    from crucible_core.artifacts import embed_markdown as embed_markdown
    from crucible_core.artifacts import record_files as record_files
    from crucible_core.broker.declaration import Declaration as Declaration
    from crucible_core.broker.declaration import Disclosure as Disclosure
    from crucible_core.broker.outputs import FixedTarget as FixedTarget
    from crucible_core.broker.outputs import OutputKindSpec as OutputKindSpec
    from crucible_core.broker.outputs import OutputRefused as OutputRefused
    from crucible_core.broker.outputs import ResolvedOutput as ResolvedOutput
    from crucible_core.broker.outputs import Violation as Violation
    from crucible_core.broker.outputs import scope_admits as scope_admits
    from crucible_core.broker.reach import (
        BUILTIN as BUILTIN,
    )
    from crucible_core.broker.reach import (
        EgressEndpoint as EgressEndpoint,
    )
    from crucible_core.broker.reach import (
        EgressReach as EgressReach,
    )
    from crucible_core.broker.service import SERVER_NAME as SERVER_NAME
    from crucible_core.broker.service import BrokerRequest as BrokerRequest
    from crucible_core.broker.service import TurnBroker as TurnBroker
    from crucible_core.broker.service import declaration_for as declaration_for
    from crucible_core.broker.service import open_mediation as open_mediation
    from crucible_core.broker.tools import BrokerRuntime as BrokerRuntime
    from crucible_core.broker.tools import BrokerTool as BrokerTool
    from crucible_core.broker.tools import ToolCall as ToolCall
    from crucible_core.broker.tools import ToolError as ToolError
    from crucible_core.cli.options import budget_cap as budget_cap
    from crucible_core.cli.options import manifest_option as manifest_option
    from crucible_core.cli.options import missing_log_hint as missing_log_hint
    from crucible_core.cli.options import repo_option as repo_option
    from crucible_core.cli.options import session_log_path as session_log_path
    from crucible_core.cli.options import session_option as session_option
    from crucible_core.cli.options import state_dir_option as state_dir_option
    from crucible_core.contract import wire as wire
    from crucible_core.contract.decide import Verdict as Verdict
    from crucible_core.contract.decide import decide as decide
    from crucible_core.contract.decide import shown_decision as shown_decision
    from crucible_core.contract.fold import Folded as Folded
    from crucible_core.contract.fold import fold_path as fold_path
    from crucible_core.contract.json_bounds import JsonRefused as JsonRefused
    from crucible_core.contract.json_bounds import loads_bounded as loads_bounded
    from crucible_core.contract.measure_diagnosis import stderr_tail as stderr_tail
    from crucible_core.contract.noise import Statistic as Statistic
    from crucible_core.contract.noise import combine as combine
    from crucible_core.contract.noise import note_with_margin as note_with_margin
    from crucible_core.contract.noise import summarize as summarize
    from crucible_core.contract.plain_text import plain as plain
    from crucible_core.contract.reading import Direction as Direction
    from crucible_core.contract.reading import (
        Reading as Reading,
    )
    from crucible_core.contract.reading import (
        parse_measure_output as parse_measure_output,
    )
    from crucible_core.contract.run_kind import EPILOGUE as EPILOGUE
    from crucible_core.contract.run_kind import verdict_word as verdict_word
    from crucible_core.control import client
    from crucible_core.control.client import RunUnreachable as RunUnreachable
    from crucible_core.control.client import read_control as read_control
    from crucible_core.control.client import state_dir_for as state_dir_for
    from crucible_core.durations import parse_duration as parse_duration
    from crucible_core.durations import short_duration as short_duration
    from crucible_core.errors import CapabilityUnserved as CapabilityUnserved
    from crucible_core.errors import (
        ControlError as ControlError,
    )
    from crucible_core.errors import (
        CrucibleError as CrucibleError,
    )
    from crucible_core.errors import (
        ExitCode as ExitCode,
    )
    from crucible_core.errors import (
        ManifestError as ManifestError,
    )
    from crucible_core.errors import (
        PluginError as PluginError,
    )
    from crucible_core.errors import ResumeConflict as ResumeConflict
    from crucible_core.errors import (
        RunFailed as RunFailed,
    )
    from crucible_core.errors import UnsupportedSectionError as UnsupportedSectionError
    from crucible_core.errors import (
        UsageError as UsageError,
    )
    from crucible_core.errors import (
        WorkspaceError as WorkspaceError,
    )
    from crucible_core.event_bounds import (
        MAX_FIELD_CHARS as MAX_FIELD_CHARS,
    )
    from crucible_core.event_bounds import (
        clip as clip,
    )
    from crucible_core.event_bounds import (
        clip_value as clip_value,
    )
    from crucible_core.flow.decode import read_session as read_session
    from crucible_core.flow.figures import improvement_pct as improvement_pct
    from crucible_core.flow.figures import versus_baseline as versus_baseline
    from crucible_core.flow.fold import fold_flow as fold_flow
    from crucible_core.flow.fold import is_kept as is_kept
    from crucible_core.flow.model import FlowModel as FlowModel
    from crucible_core.flow.model import FlowRenderer as FlowRenderer
    from crucible_core.flow.model import Iteration as Iteration
    from crucible_core.flow.model import PlanTask as PlanTask
    from crucible_core.flow.task_view import counted as counted
    from crucible_core.flow.task_view import run_tally as run_tally
    from crucible_core.flow.task_view import task_roles as task_roles
    from crucible_core.hookspecs import hookimpl as hookimpl
    from crucible_core.init_templates import InitTemplate as InitTemplate
    from crucible_core.lanes import lane
    from crucible_core.lanes.graph import GraphLane as GraphLane
    from crucible_core.lanes.graph import ended_report as ended_report
    from crucible_core.lanes.graph import print_tasks as print_tasks
    from crucible_core.lanes.graph import recorded_run as recorded_run
    from crucible_core.lanes.graph import report_ending as report_ending
    from crucible_core.lanes.graph import tell_how_to_start_anew as tell_how_to_start_anew
    from crucible_core.lanes.lane import Ending as Ending
    from crucible_core.lanes.lane import Lane as Lane
    from crucible_core.lanes.lane import LaneContext as LaneContext
    from crucible_core.lanes.lane import LaneSpec as LaneSpec
    from crucible_core.manifest.capability import Capability as Capability
    from crucible_core.manifest.containment import DEFAULT_STATE_DIR_NAME as DEFAULT_STATE_DIR_NAME
    from crucible_core.manifest.containment import (
        escape_problem as escape_problem,
    )
    from crucible_core.manifest.containment import (
        text_problem as text_problem,
    )
    from crucible_core.manifest.converter import (
        converter as converter,
    )
    from crucible_core.manifest.converter import (
        describe_structure_error as describe_structure_error,
    )
    from crucible_core.manifest.converter import show as show
    from crucible_core.manifest.durations import Seconds as Seconds
    from crucible_core.manifest.ignore_rules import ignored as ignored
    from crucible_core.manifest.ignore_rules import repository_root as repository_root
    from crucible_core.manifest.loader import LoadedComponent as LoadedComponent
    from crucible_core.manifest.loader import LoadedManifest as LoadedManifest
    from crucible_core.manifest.loader import load_manifest as load_manifest
    from crucible_core.manifest.models import JudgeSection as JudgeSection
    from crucible_core.manifest.models import PublishSection as PublishSection
    from crucible_core.manifest.paths import RunPaths as RunPaths
    from crucible_core.manifest.paths import write_atomic as write_atomic
    from crucible_core.mcp_config import ENV_MCP_CONFIG as ENV_MCP_CONFIG
    from crucible_core.mcp_config import mcp_config_file as mcp_config_file
    from crucible_core.plan import ir as ir
    from crucible_core.plan import runners, validate
    from crucible_core.plan.builtin_kinds import EngineFields as EngineFields
    from crucible_core.plan.builtin_kinds import spawn_failure as spawn_failure
    from crucible_core.plan.builtin_kinds import task_shell as task_shell
    from crucible_core.plan.events import PlanAdmitted as PlanAdmitted
    from crucible_core.plan.executor import ExecutorConfig as ExecutorConfig
    from crucible_core.plan.executor import PlanExecutor as PlanExecutor
    from crucible_core.plan.executor import PriorRun as PriorRun
    from crucible_core.plan.executor import check_same_plan as check_same_plan
    from crucible_core.plan.files import FILES_DIR_NAME as FILES_DIR_NAME
    from crucible_core.plan.files import INPUTS_DIR as INPUTS_DIR
    from crucible_core.plan.files import FileStore as FileStore
    from crucible_core.plan.ir import Isolation as Isolation
    from crucible_core.plan.ir import Task as Task
    from crucible_core.plan.ir import ValidPlan as ValidPlan
    from crucible_core.plan.iteration import core_kinds as core_kinds
    from crucible_core.plan.iteration import iteration_plan as iteration_plan
    from crucible_core.plan.kinds import RESULT_FILE as RESULT_FILE
    from crucible_core.plan.kinds import AgentTurns as AgentTurns
    from crucible_core.plan.kinds import (
        Attempt as Attempt,
    )
    from crucible_core.plan.kinds import (
        Outcome as Outcome,
    )
    from crucible_core.plan.kinds import (
        TaskContext as TaskContext,
    )
    from crucible_core.plan.kinds import (
        TaskKindSpec as TaskKindSpec,
    )
    from crucible_core.plan.kinds import TurnHooks as TurnHooks
    from crucible_core.plan.load import plan_from_data as plan_from_data
    from crucible_core.plan.load import read_plan_file as read_plan_file
    from crucible_core.plan.output import MAX_OUTPUT_DEPTH as MAX_OUTPUT_DEPTH
    from crucible_core.plan.output import finite_score as finite_score
    from crucible_core.plan.output import last_json_object as last_json_object
    from crucible_core.plan.output import reported_cost as reported_cost
    from crucible_core.plan.runners import (
        RemoteMeasure as RemoteMeasure,
    )
    from crucible_core.plan.runners import (
        RemoteMeasureFactory as RemoteMeasureFactory,
    )
    from crucible_core.plan.runners import (
        TaskRunner as TaskRunner,
    )
    from crucible_core.plan.runners import (
        TaskRunnerContext as TaskRunnerContext,
    )
    from crucible_core.plan.runners import (
        TaskRunnerFactory as TaskRunnerFactory,
    )
    from crucible_core.plan.runners import open_task_runners as open_task_runners
    from crucible_core.plan.runners import runner_for as runner_for
    from crucible_core.plan.runners import unrunnable_tasks as unrunnable_tasks
    from crucible_core.plugins import Plugins as Plugins
    from crucible_core.plugins import load_plugins as load_plugins
    from crucible_core.process import Completed as Completed
    from crucible_core.protocols import (
        AgentBackend as AgentBackend,
    )
    from crucible_core.protocols import (
        AgentEventSink as AgentEventSink,
    )
    from crucible_core.protocols import (
        ApplyOutcome as ApplyOutcome,
    )
    from crucible_core.protocols import AssembledWorld as AssembledWorld
    from crucible_core.protocols import (
        BackendContext as BackendContext,
    )
    from crucible_core.protocols import (
        BackendFactory as BackendFactory,
    )
    from crucible_core.protocols import CommandShell as CommandShell
    from crucible_core.protocols import DomainPacks as DomainPacks
    from crucible_core.protocols import (
        FailureClass as FailureClass,
    )
    from crucible_core.protocols import ForkingWorld as ForkingWorld
    from crucible_core.protocols import (
        Harness as Harness,
    )
    from crucible_core.protocols import (
        HarnessContext as HarnessContext,
    )
    from crucible_core.protocols import (
        HarnessFactory as HarnessFactory,
    )
    from crucible_core.protocols import Judge as Judge
    from crucible_core.protocols import (
        JudgeContext as JudgeContext,
    )
    from crucible_core.protocols import (
        JudgeFactory as JudgeFactory,
    )
    from crucible_core.protocols import LocalSource as LocalSource
    from crucible_core.protocols import (
        MeasureContext as MeasureContext,
    )
    from crucible_core.protocols import (
        Publisher as Publisher,
    )
    from crucible_core.protocols import (
        PublisherFactory as PublisherFactory,
    )
    from crucible_core.protocols import (
        PublishRequest as PublishRequest,
    )
    from crucible_core.protocols import (
        RecordedKept as RecordedKept,
    )
    from crucible_core.protocols import Reporter as Reporter
    from crucible_core.protocols import ReporterContext as ReporterContext
    from crucible_core.protocols import (
        ReporterFactory as ReporterFactory,
    )
    from crucible_core.protocols import (
        SandboxCommand as SandboxCommand,
    )
    from crucible_core.protocols import (
        SandboxHarness as SandboxHarness,
    )
    from crucible_core.protocols import (
        SandboxLayout as SandboxLayout,
    )
    from crucible_core.protocols import (
        ServedTool as ServedTool,
    )
    from crucible_core.protocols import (
        ServiceEndpoint as ServiceEndpoint,
    )
    from crucible_core.protocols import (
        ServiceTransport as ServiceTransport,
    )
    from crucible_core.protocols import (
        ShellStdin as ShellStdin,
    )
    from crucible_core.protocols import (
        ShellTurn as ShellTurn,
    )
    from crucible_core.protocols import ShellTurnBackend as ShellTurnBackend
    from crucible_core.protocols import (
        SourceChanges as SourceChanges,
    )
    from crucible_core.protocols import (
        Staged as Staged,
    )
    from crucible_core.protocols import (
        Turn as Turn,
    )
    from crucible_core.protocols import (
        TurnResult as TurnResult,
    )
    from crucible_core.protocols import (
        WorkspaceMemory as WorkspaceMemory,
    )
    from crucible_core.protocols import (
        WorkspaceMemoryContext as WorkspaceMemoryContext,
    )
    from crucible_core.protocols import (
        WorkspaceMemoryFactory as WorkspaceMemoryFactory,
    )
    from crucible_core.protocols import (
        World as World,
    )
    from crucible_core.protocols import (
        WorldContext as WorldContext,
    )
    from crucible_core.protocols import (
        WorldFactory as WorldFactory,
    )
    from crucible_core.redact import Redactor as Redactor
    from crucible_core.registry import Deferred as Deferred
    from crucible_core.registry import Register as Register
    from crucible_core.registry import Registry as Registry
    from crucible_core.registry import provider_of as provider_of
    from crucible_core.reporters.console import ConsoleReporter as ConsoleReporter
    from crucible_core.reporters.console_text import show_number as show_number
    from crucible_core.reporters.console_view import ConsoleView as ConsoleView
    from crucible_core.reporters.console_view import row_label as row_label
    from crucible_core.run import parking, part_tokens
    from crucible_core.run.budget import Budget as Budget
    from crucible_core.run.context import LoopExit as LoopExit
    from crucible_core.run.context import Run as Run
    from crucible_core.run.drivers import build_drivers as build_drivers
    from crucible_core.run.drivers import world_of as world_of
    from crucible_core.run.engine import DEFAULT_TURN_TIMEOUT as DEFAULT_TURN_TIMEOUT
    from crucible_core.run.engine import Engine as Engine
    from crucible_core.run.engine import RunOptions as RunOptions
    from crucible_core.run.engine import engine_credentials as engine_credentials
    from crucible_core.run.engine import engine_environment as engine_environment
    from crucible_core.run.identity import run_identity as run_identity
    from crucible_core.run.injects import copy_injects as copy_injects
    from crucible_core.run.injects import refresh_frozen as refresh_frozen
    from crucible_core.run.lifecycle import (
        KeptCommit as KeptCommit,
    )
    from crucible_core.run.lifecycle import Lifecycle as Lifecycle
    from crucible_core.run.lifecycle import (
        RunContext as RunContext,
    )
    from crucible_core.run.lifecycle import (
        RunEnd as RunEnd,
    )
    from crucible_core.run.lifecycle import (
        TurnAdditions as TurnAdditions,
    )
    from crucible_core.run.lifecycle import (
        TurnContext as TurnContext,
    )
    from crucible_core.run.lifecycle import (
        TurnUnavailable as TurnUnavailable,
    )
    from crucible_core.run.opened_runners import HeldEvents as HeldEvents
    from crucible_core.run.opened_runners import open_configured_runners as open_configured_runners
    from crucible_core.run.publish import build_publisher as build_publisher
    from crucible_core.run.rounds import RoundRequest as RoundRequest
    from crucible_core.run.rounds import RoundStrategy as RoundStrategy
    from crucible_core.run.rounds import SearchRound as SearchRound
    from crucible_core.run.rounds import prepare_round as prepare_round
    from crucible_core.run.signals import AfterTurn as AfterTurn
    from crucible_core.run.signals import AgentNote as AgentNote
    from crucible_core.run.signals import AgentSignals as AgentSignals
    from crucible_core.run.signals import Escalated as Escalated
    from crucible_core.run.signals import SignalContext as SignalContext
    from crucible_core.run.signals import Suspend as Suspend
    from crucible_core.run.steps import measure_staged as measure_staged
    from crucible_core.run.steps import snapshot_keep as snapshot_keep
    from crucible_core.run.steps import stage_for_measure as stage_for_measure
    from crucible_core.run.workspace_setup import SETUP_TIMEOUT as SETUP_TIMEOUT
    from crucible_core.run.workspace_setup import prepare_workspace as prepare_workspace
    from crucible_core.run.workspace_setup import setup_component as setup_component
    from crucible_core.run.workspace_setup import workspace_in_use as workspace_in_use
    from crucible_core.services import run_services
    from crucible_core.services.catalog import Handoff as Handoff
    from crucible_core.services.catalog import ServiceTool as ServiceTool
    from crucible_core.services.catalog import ServiceToolFactory as ServiceToolFactory
    from crucible_core.services.run_services import PlannedServices as PlannedServices
    from crucible_core.services.run_services import plan_services as plan_services
    from crucible_core.services.run_services import stable_run_id as stable_run_id
    from crucible_core.session import entry
    from crucible_core.session.embed import CheckReport as CheckReport
    from crucible_core.session.embed import RunResult as RunResult
    from crucible_core.session.embed import check as check
    from crucible_core.session.embed import results as results
    from crucible_core.session.embed import run as run
    from crucible_core.session.request import SessionRequest as SessionRequest
    from crucible_core.session.request import TaskOptions as TaskOptions
    from crucible_core.session_log import read_events as read_events
    from crucible_core.shell import Shell as Shell
    from crucible_core.workflow import language
    from crucible_core.workflow.lanes import SCORED_WORKFLOW_TYPES as SCORED_WORKFLOW_TYPES
    from crucible_core.workflow.lanes import WORKFLOW_TYPES as WORKFLOW_TYPES
    from crucible_core.workflow.language import WorkflowLanguage as WorkflowLanguage
    from crucible_core.workflow.pack import ARTIFACT_NAME as ARTIFACT_NAME
    from crucible_core.workflow.pack import effective_workflow as effective_workflow
    from crucible_core.workflow.pack import plan_data as plan_data
    from crucible_core.workflow.pack import to_toml as to_toml
    from crucible_core.workflow.pack import validate_document as validate_document
    from crucible_core.workspace_files import OwnedFile as OwnedFile
    from crucible_core.workspace_files import copy_tree_into as copy_tree_into

    # renamed on the way out (a flat namespace needs the module's name in it); mypy re-exports
    # an assignment, never an `import x as y`
    run_process = process.run
    send_control = client.send_to
    LaneShell = lane.Shell
    validate_plan = validate.validate
    encode_components = part_tokens.encode
    decode_components = part_tokens.decode
    COMPONENTS_TOKEN_PREFIX = part_tokens.TOKEN_PREFIX
    task_refusals = runners.refusals
    toml_document = toml_text.document
    find_workflow_source = language.find_source
    toml_value = toml_text.value
    declared_services = run_services.declarations_of
    execute_session = entry.execute
    PROVISIONING_MARKER = parking.MARKER_NAME

# public name -> (module, attribute inside it)
_WHERE: dict[str, tuple[str, str]] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        public, _, attribute = name.partition("=")
        _WHERE[public] = (module, attribute or public)


# Hook markers and registration.
_export("crucible_core.hookspecs", "hookimpl")
_export("crucible_core.registry", "Register", "Deferred")
# Errors a plugin may raise (each carries an exit code and a next step for the user).
_export(
    "crucible_core.errors",
    "ExitCode",
    "CrucibleError",
    "ManifestError",
    "WorkspaceError",
    "PluginError",
    "RunFailed",
    "ControlError",
    "UsageError",
)
# Driver protocols and the contexts their factories receive.
_export(
    "crucible_core.protocols",
    "AgentBackend",
    "AgentEventSink",
    "ApplyOutcome",
    "AssembledWorld",
    "BackendContext",
    "BackendFactory",
    "CommandShell",
    "DomainPacks",
    "FailureClass",
    "ForkingWorld",
    "Harness",
    "HarnessContext",
    "HarnessFactory",
    "Judge",
    "JudgeContext",
    "JudgeFactory",
    "LocalSource",
    "MeasureContext",
    "PublishRequest",
    "Publisher",
    "PublisherFactory",
    "RecordedKept",
    "Reporter",
    "ReporterContext",
    "ReporterFactory",
    "SandboxCommand",
    "SandboxHarness",
    "SandboxLayout",
    "ServedTool",
    "ServiceEndpoint",
    "ServiceTransport",
    "ShellStdin",
    "ShellTurn",
    "ShellTurnBackend",
    "SourceChanges",
    "Staged",
    "Turn",
    "TurnResult",
    "World",
    "WorldContext",
    "WorldFactory",
    "WorkspaceMemory",
    "WorkspaceMemoryContext",
    "WorkspaceMemoryFactory",
)
# `crucible init` starting points.
_export("crucible_core.init_templates", "InitTemplate")
# Contexts handed to the lifecycle hooks.
_export(
    "crucible_core.run.lifecycle",
    "RunContext",
    "RunEnd",
    "TurnAdditions",
    "TurnContext",
    "TurnUnavailable",
    "KeptCommit",
)
# What the agent may write to ask for a human, as a plugin reads it (crucible_agent_signals).
_export(
    "crucible_core.run.signals",
    "AgentSignals",
    "SignalContext",
    "AfterTurn",
    "AgentNote",
    "Escalated",
    "Suspend",
)
# Plan task kinds and task runners.
_export("crucible_core.plan.ir", "Task")
_export("crucible_core.plan.kinds", "Attempt", "Outcome", "TaskContext", "TaskKindSpec")
_export("crucible_core.plan.runners", "TaskRunner", "TaskRunnerContext", "TaskRunnerFactory")
# Workflow authoring languages: what one provides, and the workflow types (lanes) it may declare.
_export("crucible_core.workflow.language", "WorkflowLanguage")
# The workflow source beside a manifest (workflow.star...) with its language, or None.
_export("crucible_core.workflow.language", "find_workflow_source=find_source")
_export("crucible_core.workflow.lanes", "WORKFLOW_TYPES", "SCORED_WORKFLOW_TYPES")
# Run-service tools a plugin installs (discovery; a run trusts only the catalog).
_export("crucible_core.services.catalog", "ServiceTool", "ServiceToolFactory", "Handoff")
# Broker tools, output kinds and what an agent may reach.
_export("crucible_core.broker.tools", "BrokerTool", "ToolCall", "ToolError")
_export("crucible_core.broker.outputs", "OutputKindSpec", "OutputRefused")
_export("crucible_core.broker.reach", "BUILTIN", "EgressEndpoint", "EgressReach")
_export("crucible_core.broker.service", "SERVER_NAME")
# The broker seam: a broker plugin answers crucible_open_broker with a TurnBroker for the request.
_export("crucible_core.broker.service", "BrokerRequest", "TurnBroker")
_export("crucible_core.broker.tools", "BrokerRuntime")
_export("crucible_core.broker.declaration", "Declaration")
_export("crucible_core.broker.outputs", "FixedTarget", "ResolvedOutput", "Violation", "scope_admits")
# The marker request_approval writes, the same one an agent may write itself.
_export("crucible_core.run.parking", "PROVISIONING_MARKER=MARKER_NAME")
# Readings, measure output and the session wire records.
_export("crucible_core.contract", "wire")
_export("crucible_core.contract.reading", "Reading", "parse_measure_output")
_export("crucible_core.contract.measure_diagnosis", "stderr_tail")
_export("crucible_core.contract.json_bounds", "loads_bounded", "JsonRefused")
# Manifest access for drivers that own settings tables.
_export("crucible_core.manifest.loader", "LoadedComponent", "LoadedManifest", "load_manifest")
_export("crucible_core.manifest.models", "JudgeSection", "PublishSection")
_export("crucible_core.manifest.durations", "Seconds")
_export("crucible_core.manifest.converter", "converter", "describe_structure_error")
_export("crucible_core.manifest.containment", "escape_problem", "text_problem")
_export("crucible_core.manifest.paths", "write_atomic")
_export("crucible_core.toml_text", "toml_document=document")  # a manifest or TOML file written from data
_export("crucible_core.durations", "parse_duration")
# Child processes: every child goes through the supervisor.
_export("crucible_core.process", "Completed", "run_process=run")
_export("crucible_core.shell", "Shell")
# Hostile input: agent-written files, bounded event fields, link-refusing copies.
_export("crucible_core.agent_files", "AgentFileRefused", "read_regular", "load_json")
_export(
    "crucible_core.agent_files", "MAX_MARKER_BYTES", "MAX_MARKER_DEPTH"
)  # an agent's marker file's bounds
_export("crucible_core.event_bounds", "MAX_FIELD_CHARS", "clip", "clip_value")
_export("crucible_core.workspace_files", "copy_tree_into", "OwnedFile")
_export("crucible_core.agent_files", "DirectoryWatch")  # looks for markers skipped while nothing changed
# Declared artifacts ([[workspace.artifact]]): collected as hostile input, rendered for a PR body
# and listed for a run record (KeptCommit.artifacts and RunEnd.artifacts carry a collection).
_export(
    "crucible_core.artifacts",
    "Collected",
    "CollectedArtifact",
    "collect_artifacts",
    "embed_markdown",
    "record_files",
    "EMBED_MAX_BYTES",
    "UPLOAD_MAX_BYTES",
)
# Agent tool configuration (the 0600 MCP config file).
_export("crucible_core.mcp_config", "ENV_MCP_CONFIG", "mcp_config_file")
# Command-line building blocks for plugin commands, and the plain console reporter.
_export("crucible_core.cli.options", "budget_cap", "manifest_option", "state_dir_option", "repo_option")
# What `crucible init` keeps out of git: the run's directories beside the manifest.
_export("crucible_core.manifest.containment", "DEFAULT_STATE_DIR_NAME")
_export("crucible_core.manifest.ignore_rules", "ignored", "repository_root")
_export("crucible_core.control.client", "state_dir_for")  # the state directory a command's manifest names
# A live run's control bridge as a client reaches it (`crucible watch-pr` steers through it).
_export("crucible_core.control.client", "RunUnreachable", "read_control", "send_control=send_to")
_export("crucible_core.reporters.console", "ConsoleReporter")
# A reporter's view of the run (the console's fold of the log) and the words it prints with; every
# agent or measure text goes through `plain` before it reaches a terminal.
_export("crucible_core.reporters.console_view", "ConsoleView", "row_label")
_export("crucible_core.reporters.console_text", "show_number")
_export("crucible_core.contract.plain_text", "plain")
_export("crucible_core.durations", "short_duration")
_export("crucible_core.flow.figures", "improvement_pct", "versus_baseline")
_export("crucible_core.flow.task_view", "counted")
# Flow renderers: the model `crucible flow` folds from the log, and the words and charts its views share.
_export("crucible_core.flow.model", "FlowModel", "FlowRenderer", "Iteration", "PlanTask")
_export("crucible_core.flow.task_view", "run_tally", "task_roles")
_export("crucible_core.contract.decide", "shown_decision")
_export("crucible_core.contract.fold", "fold_path", "Folded")
_export("crucible_core.contract.run_kind", "EPILOGUE", "verdict_word")
# Embedding: run, check and read results from Python, as the CLI does (docs/python-api.md).
_export("crucible_core.session.embed", "run", "check", "results", "RunResult", "CheckReport")
_export("crucible_core.plugins", "Plugins", "load_plugins")
# Round strategies: what `crucible_register_round_strategies` registers and the round it prepares,
# the settings a `[search]` class uses, and the engine operations a round runs on: the plan
# executor for its graph, the turn, stage, measure, decide and keep steps of the loop.
_export("crucible_core.run.rounds", "RoundStrategy", "RoundRequest", "SearchRound")
_export("crucible_core.errors", "CapabilityUnserved")
_export("crucible_core.manifest.capability", "Capability")
_export("crucible_core.manifest.converter", "show")
_export("crucible_core.contract.reading", "Direction")
_export("crucible_core.contract.decide", "Verdict", "decide")
_export("crucible_core.contract.noise", "Statistic", "combine", "note_with_margin", "summarize")
_export("crucible_core.redact", "Redactor")
_export("crucible_core.plan", "ir")
_export("crucible_core.plan.builtin_kinds", "EngineFields")
_export("crucible_core.plan.executor", "ExecutorConfig", "PlanExecutor")
_export("crucible_core.plan.iteration", "core_kinds")
_export("crucible_core.plan.validate", "validate_plan=validate")
_export("crucible_core.plan.runners", "open_task_runners", "runner_for", "task_refusals=refusals")
_export("crucible_core.registry", "Registry")
_export("crucible_core.run.engine", "Engine", "DEFAULT_TURN_TIMEOUT")
_export("crucible_core.run.context", "Run", "LoopExit")
_export("crucible_core.run.steps", "stage_for_measure", "measure_staged", "snapshot_keep")
# Lanes: a kind of run a plugin registers (crucible_register_lanes), what the session hands it,
# and the parts a graph lane is built from: the body a playbook shares with a plan file, the plan
# executor, the run's workspace, drivers, identity, services and task runners.
_export("crucible_core.lanes.lane", "Lane", "LaneContext", "LaneSpec", "Ending", "LaneShell=Shell")
_export(
    "crucible_core.lanes.graph",
    "GraphLane",
    "ended_report",
    "print_tasks",
    "recorded_run",
    "report_ending",
    "tell_how_to_start_anew",
)
_export("crucible_core.session.request", "SessionRequest")
_export("crucible_core.errors", "ResumeConflict", "UnsupportedSectionError")
_export("crucible_core.plan.ir", "ValidPlan", "Isolation")
_export("crucible_core.plan.load", "plan_from_data")
_export("crucible_core.plan.executor", "PriorRun", "check_same_plan")
_export("crucible_core.plan.files", "FILES_DIR_NAME", "FileStore", "INPUTS_DIR")
_export("crucible_core.registry", "provider_of")
_export("crucible_core.workflow.pack", "ARTIFACT_NAME", "effective_workflow", "plan_data", "to_toml")
_export("crucible_core.broker.service", "declaration_for")
# A playbook's own mediated writes ([publish]): the publisher, and a broker that grants no tool.
_export("crucible_core.broker.service", "open_mediation")
_export("crucible_core.run.publish", "build_publisher")
_export("crucible_core.broker.declaration", "Disclosure")
_export("crucible_core.manifest.paths", "RunPaths")
_export(
    "crucible_core.run.workspace_setup",
    "SETUP_TIMEOUT",
    "prepare_workspace",
    "setup_component",
    "workspace_in_use",
)
_export(
    "crucible_core.run.part_tokens",
    "encode_components=encode",
    "decode_components=decode",
    "COMPONENTS_TOKEN_PREFIX=TOKEN_PREFIX",
)
_export("crucible_core.run.injects", "copy_injects", "refresh_frozen")
_export("crucible_core.run.drivers", "build_drivers")
_export("crucible_core.run.engine", "engine_credentials", "engine_environment")
_export("crucible_core.run.identity", "run_identity")
_export("crucible_core.run.lifecycle", "Lifecycle")
_export("crucible_core.run.opened_runners", "HeldEvents", "open_configured_runners")
_export("crucible_core.services.run_services", "PlannedServices", "plan_services", "stable_run_id")
_export("crucible_core.session_log", "read_events")
# `crucible flow` (crucible-plugin-flow-page): the session log it reads and the model it folds.
_export("crucible_core.cli.options", "missing_log_hint", "session_log_path", "session_option")
_export("crucible_core.flow.decode", "read_session")
_export("crucible_core.flow.fold", "fold_flow")
# Task kinds a plugin adds (crucible-plugin-task-agent): the agent a run lends to agent tasks, the
# file an agent task's turn writes, the shell a kind's command runs through, reading its output.
_export("crucible_core.plan.kinds", "AgentTurns", "RESULT_FILE", "TurnHooks")
_export("crucible_core.plan.builtin_kinds", "task_shell", "spawn_failure")
_export("crucible_core.plan.output", "MAX_OUTPUT_DEPTH", "finite_score", "last_json_object", "reported_cost")
# The judge's measure carried out by a task runner (crucible_register_remote_measures).
_export("crucible_core.plan.runners", "RemoteMeasure", "RemoteMeasureFactory")
# `crucible diff` (crucible-plugin-world-git): the kept states a log names, the world that shows them.
_export("crucible_core.flow.fold", "is_kept")
_export("crucible_core.run.drivers", "world_of")
# `crucible plan run` and `crucible plan show` (crucible-plugin-lane-plan): a plan file read and its
# services refused, a graph printed, and a session started on a lane the command prepares.
_export("crucible_core.plan.load", "read_plan_file")
_export("crucible_core.plan.events", "PlanAdmitted")
_export("crucible_core.plan.iteration", "iteration_plan")
_export("crucible_core.plan.runners", "unrunnable_tasks")
_export("crucible_core.services.run_services", "declared_services=declarations_of")
_export("crucible_core.toml_text", "toml_value=value")
_export("crucible_core.workflow.pack", "validate_document")
_export("crucible_core.run.engine", "RunOptions")
_export("crucible_core.run.rounds", "prepare_round")
_export("crucible_core.run.budget", "Budget")
_export("crucible_core.session.request", "TaskOptions")
_export("crucible_core.session.entry", "execute_session=execute")

__all__ = ["API_VERSION", *sorted(_WHERE)]


# public name -> what to use instead; a deprecated name still resolves, for one minor release.
_DEPRECATED: dict[str, str] = {}


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if name in _DEPRECATED:
        warnings.warn(
            f"crucible_core.api.{name} is deprecated and goes in the next release: {_DEPRECATED[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
    owner = importlib.import_module(module)
    try:
        value = getattr(owner, attribute)
    except AttributeError:  # a submodule not yet imported by its package (`contract.wire`)
        value = importlib.import_module(f"{module}.{attribute}")
    if name not in _DEPRECATED:  # a deprecated name is looked up (and warns) at every use
        globals()[name] = value  # resolved once; later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return list(__all__)
