"""The `command` init template: a shell script is the proposer, so a run needs no agent and no credentials."""

from __future__ import annotations

from crucible_core.api import InitTemplate

MANIFEST = """\
# crucible manifest (command template): a shell script proposes each change.
# See docs/manifest.md for every key.

[repo]
path = "."

[workspace]
dir = "workspace"                  # kept out of git by .gitignore, with state/
# Both scripts are copied in from here and re-copied before every measure, so a proposal
# cannot change how it is proposed or scored.
inject = ["measure.sh", "propose.sh"]

[agent]
backend = "command"
agent_cmd = "./propose.sh"         # gets the prompt on stdin, CRUCIBLE_ITERATION in its env
goal = "Add one line to progress.txt per iteration."

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
objective = "lines"

# The gate's own test (`crucible check` runs it): in a fresh copy of the workspace, good_cmd
# stages a change the measure must score better than the change bad_cmd stages.
[judge.selftest]
good_cmd = "echo good >> progress.txt"
bad_cmd = "rm -f progress.txt"
"""

PROPOSE = """\
#!/bin/sh
# The proposer: runs in the workspace once per iteration and edits files there.
# Replace it with your own deterministic change generator (a codemod, a parameter sweep...).
set -eu
echo "step $CRUCIBLE_ITERATION" >> progress.txt
"""

MEASURE = """\
#!/bin/sh
# The judge: print one JSON line {"valid": bool, "score": number, "solved": bool, "note": str}.
# A copy sits in the agent's workspace: the agent may read it, but it is re-copied from here
# before every measure, so no edit in the workspace changes what is measured.
# Here the score is the number of lines in progress.txt (0 before the first proposal).
set -eu
lines=0
if [ -f progress.txt ]; then lines=$(wc -l < progress.txt | tr -d ' '); fi
printf '{"valid": true, "score": %s, "note": "lines=%s"}\\n' "$lines" "$lines"
"""

FILES = {"crucible.toml": MANIFEST, "propose.sh": PROPOSE, "measure.sh": MEASURE}

TEMPLATE = InitTemplate(
    "command",
    "a shell script proposes each change: no agent, no credentials",
    FILES,
    frozenset({"measure.sh", "propose.sh"}),
    "`crucible check`, then `crucible run --iterations 3`; then make propose.sh and measure.sh yours",
)
