#!/bin/sh
# Write catalog.toml for the installed crucible-service-oubliette (its absolute path and digest).
set -eu
tool=$(command -v crucible-service-oubliette) || { echo "crucible-service-oubliette is not on PATH (activate the venv)" >&2; exit 1; }
digest=$(sha256sum "$tool" | cut -d' ' -f1)
here=$(dirname "$0")
sed -e "s|@EXECUTABLE@|$tool|" -e "s|@SHA256@|$digest|" "$here/catalog.toml.in" > "$here/catalog.toml"
echo "wrote $here/catalog.toml ($tool, sha256 $digest)"
