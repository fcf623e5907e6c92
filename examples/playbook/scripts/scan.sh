#!/bin/sh
# Collect every line carrying the marker into out/notes.txt (a declared file).
set -eu
marker="$1"
mkdir -p out
grep -rn "$marker" src > out/notes.txt || true
count=$(wc -l < out/notes.txt | tr -d ' ')
echo "{\"count\": $count}"
