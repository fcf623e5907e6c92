#!/bin/sh
# The proposer: add the next greeting from a fixed list.
set -eu
for word in hola bonjour ciao hallo; do
  if ! grep -qx "$word" greetings.txt; then
    echo "$word" >> greetings.txt
    exit 0
  fi
done
