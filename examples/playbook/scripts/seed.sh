#!/bin/sh
# Lay out a small tree to scan (a real playbook would clone or fetch one).
set -eu
mkdir -p src
printf 'one\n# TODO: name things\n' > src/a.txt
printf '# TODO: test this\n# FIXME: and this\n' > src/b.txt
echo '{"seeded": 2}'
