#!/bin/sh
# The judge: the number of distinct non-empty lines; three or more solve the goal.
n=$(grep -v '^$' greetings.txt 2>/dev/null | sort -u | wc -l | tr -d ' ')
solved=false
[ "$n" -ge 3 ] && solved=true
printf '{"valid": true, "score": %s, "solved": %s, "note": "%s greetings"}\n' "$n" "$solved" "$n"
