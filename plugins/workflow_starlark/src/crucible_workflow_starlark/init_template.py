"""The `playbook` init template: a workflow.star graph that runs once with no judge, on the command backend (no credentials)."""

MANIFEST = """\
# crucible manifest (playbook template): the graph in workflow.star runs once; no [judge].
# Run it:  crucible run --max-cost 0.5 --max-time 5m
# See docs/workflows.md for the DSL and the playbook rules.

[workflow]
type = "playbook"                  # must agree with workflow(type = ...) in workflow.star

[workspace]
dir = "workspace"                  # starts empty (no [repo]); .gitignore keeps it and state/ out of git
# Frozen injects: re-copied before every task, so no task can change the steps after it.
inject = ["gather.sh", "agent.sh"]

[agent]
goal = "Gather a few facts about the workspace and summarize them."
backend = "command"                # agent tasks run agent_cmd instead of a model
agent_cmd = "sh agent.sh"          # switch to backend = "local" and a harness to use a model
"""

WORKFLOW = """\
# The graph: each task runs once, in dependency order. `crucible workflow compile` prints the
# [workflow] table this compiles to; `crucible plan show --manifest crucible.toml` draws it.
params = {
    "title": {"type": "string", "default": "Workspace facts", "description": "the report's title"},
}

gather = command(
    name = "gather",
    run = "sh gather.sh",
    emits = ["files"],                    # a promised output field: missing means the task fails
    emits_files = ["out/facts.txt"],      # staged read-only for every task downstream
)
summarize = agent(
    name = "summarize",
    prompt = "Summarize the facts in $CRUCIBLE_INPUT_FILES/gather/out/facts.txt for: " + param("title"),
    depends_on = [gather],
    emits = ["summary"],
)
report = command(
    name = "report",
    run = "mkdir -p out && printf '%s\\\\n' \\"$CRUCIBLE_INPUTS\\" > out/report.json",
    depends_on = [summarize],
    emits_files = ["out/report.json"],
)
done = command(
    name = "done",
    run = "printf '%s\\\\n' \\"$CRUCIBLE_INPUTS\\" > outcome.json",   # gets the run's outcome
    stage = "epilogue",
    required = False,
)

workflow(type = "playbook", tasks = [gather, summarize, report, done])
"""

GATHER = """\
#!/bin/sh
# A step: any command. Its last stdout line, when it is a JSON object, is its output.
set -eu
mkdir -p out
ls -1 > out/facts.txt
printf '{"files": %s}\\n' "$(wc -l < out/facts.txt | tr -d ' ')"
"""

AGENT = """\
#!/bin/sh
# A stand-in agent for the command backend: the rendered prompt arrives on stdin, and the turn
# leaves its JSON result in PLAN_TASK_RESULT.json in the workspace root, as a real agent does.
set -eu
facts="$CRUCIBLE_INPUT_FILES/gather/out/facts.txt"
printf '{"summary": "%s entries in the workspace"}\\n' "$(wc -l < "$facts" | tr -d ' ')" > PLAN_TASK_RESULT.json
"""

FILES = {"crucible.toml": MANIFEST, "workflow.star": WORKFLOW, "gather.sh": GATHER, "agent.sh": AGENT}
