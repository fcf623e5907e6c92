#!/bin/sh
# The task example's proposer: append a line naming this turn to NOTES.md.
set -eu
echo "- turn ${CRUCIBLE_ITERATION:-?} was here" >> NOTES.md
