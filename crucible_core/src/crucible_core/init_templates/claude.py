"""The default template: Claude Code on this host, scored by a measure stub the user replaces."""

MANIFEST = """\
# crucible manifest: see docs/manifest.md for every key.

[repo]
path = "."                 # the repository the agent edits a copy of

[workspace]
dir = "workspace"          # where that copy lives (add workspace/ and state/ to .gitignore)
inject = ["measure.sh"]    # the gate: copied in and re-copied before every measure

[agent]
backend = "local"          # the Claude Code CLI on this host; "command" runs agent_cmd instead
goal = "Describe what the agent should improve."

[judge]
measure_cmd = "./measure.sh"
direction = "lower"        # or "higher"
objective = "score"
"""

MEASURE = """\
#!/bin/sh
# The judge: print one JSON line {"valid": bool, "score": number, "solved": bool, "note": str}.
# A copy sits in the agent's workspace: the agent may read it, but it is re-copied from here
# before every measure, so no edit in the workspace changes what is measured.
# This stub always reports the same score; point it at your real benchmark or test suite.
printf '{"valid": true, "score": 0, "note": "stub measure: replace me"}\\n'
"""

FILES = {"crucible.toml": MANIFEST, "measure.sh": MEASURE}
