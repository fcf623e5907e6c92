#!/bin/sh
# The GPU judge's stand-in benchmark: it names the devices its pod sees and scores the integer
# in value.txt (a real one would time a kernel on the candidate's code).
echo "devices: ${NVIDIA_VISIBLE_DEVICES:-none visible}" >&2
v=$(cat value.txt 2>/dev/null || true)
case "$v" in
  ''|*[!0-9]*) echo '{"valid": false, "note": "value.txt does not hold a whole number"}'; exit 0 ;;
esac
echo "{\"valid\": true, \"score\": $v, \"note\": \"value=$v\"}"
