#!/bin/sh
# The demo's proposer: fix the first remaining bug in calc.py.
set -eu
if grep -q "a - b  # bug" calc.py; then
  sed -i 's/a - b  # bug: subtracts/a + b/' calc.py
elif grep -q "a + b  # bug" calc.py; then
  sed -i 's/a + b  # bug: adds/a * b/' calc.py
fi
