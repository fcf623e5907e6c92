#!/bin/sh
# The counter's proposer: add one to the integer in value.txt.
set -eu
v=$(cat value.txt)
echo $((v + 1)) > value.txt
