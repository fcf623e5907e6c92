#!/bin/sh
# The counter's judge: the score is the integer in value.txt; 5 or more solves the goal.
v=$(cat value.txt 2>/dev/null || true)
case "$v" in
  ''|*[!0-9]*)
    printf '{"valid": false, "note": "value.txt does not hold a whole number"}\n'
    exit 0 ;;
esac
solved=false
[ "$v" -ge 5 ] && solved=true
printf '{"valid": true, "score": %s, "solved": %s, "note": "value=%s"}\n' "$v" "$solved" "$v"
