#!/bin/sh
# Write the report from the scan's staged file (staged read-only under the producer's name).
set -eu
mkdir -p out
{ echo "# Notes"; echo; sed 's/^/- /' "$CRUCIBLE_INPUT_FILES/scan/out/notes.txt"; } > out/report.md
echo '{"written": "out/report.md"}'
