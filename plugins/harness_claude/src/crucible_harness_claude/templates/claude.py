"""The default template: Claude Code on this host, scored by a starting measure the user replaces."""

MANIFEST = """\
# crucible manifest: see docs/manifest.md for every key.

[repo]
path = "."                 # the repository the agent edits a copy of

[workspace]
dir = "workspace"          # where that copy lives (kept out of git by .gitignore, with state/)
inject = ["measure.sh"]    # the gate: copied in and re-copied before every measure

[agent]
backend = "local"          # the Claude Code CLI on this host; "command" runs agent_cmd instead
# Describe what the agent should improve; measure.sh must score exactly that.
goal = "Resolve the TODO and FIXME comments in this repository without breaking anything."

[judge]
measure_cmd = "./measure.sh"
direction = "lower"        # or "higher"
objective = "todo_lines"

# The gate's own test (`crucible check` runs it): in a fresh copy of the workspace, good_cmd
# stages a change the measure must score better than the change bad_cmd stages. When you
# replace measure.sh, replace these two with a known-good and a known-bad change for it.
[judge.selftest]
good_cmd = "true"
bad_cmd = "echo 'TODO: crucible self-test control' > crucible-selftest.txt"
"""

MEASURE = """\
#!/bin/sh
# The judge: print one JSON line {"valid": bool, "score": number, "solved": bool, "note": str}.
# A copy sits in the agent's workspace: the agent may read it, but it is re-copied from here
# before every measure, so no edit in the workspace changes what is measured.
# This starting measure counts the lines holding TODO or FIXME (lower is better); point it at
# your real benchmark or test suite, and change the goal and [judge.selftest] to match.
set -eu
count=$(grep -rIE --exclude-dir=.git --exclude-dir=.claude --exclude=measure.sh \\
    --exclude=crucible.toml --exclude=RESULTS.md -e 'TODO|FIXME' . | wc -l | tr -d ' ')
printf '{"valid": true, "score": %s, "note": "%s TODO/FIXME lines"}\\n' "$count" "$count"
"""

FILES = {"crucible.toml": MANIFEST, "measure.sh": MEASURE}
