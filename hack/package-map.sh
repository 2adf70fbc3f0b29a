#!/usr/bin/env bash
# Rewrites the package maps of README.md (pod, fleet, operator, tools) and
# docs/development.md (test support), between their package-map markers,
# from the packages' comments (`go list`), grouped by the prefixes in
# test/docs/packagemap.go. `make test` fails while a map is stale
# (test/docs TestPackageMap). Run it after adding, moving or renaming a
# package, or changing a package comment's first sentence.
set -euo pipefail
cd "$(dirname "$0")/.."
KVPILOT_UPDATE_DOCS=1 go test -count=1 -run '^TestPackageMap$' ./test/docs/
