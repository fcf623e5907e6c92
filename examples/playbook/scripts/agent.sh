#!/bin/sh
# A stand-in agent for the command backend: it gets the rendered prompt on stdin and, like a
# real agent task, leaves its JSON result in PLAN_TASK_RESULT.json in the workspace root.
set -eu
count=$(grep -c '^- ' "$CRUCIBLE_INPUT_FILES/report/out/report.md" || true)
printf '{"summary": "%s notes need attention"}\n' "$count" > PLAN_TASK_RESULT.json
