#!/usr/bin/env bash
# Rewrites the package map in README.md (between its package-map markers)
# from the packages' comments (`go list`), grouped pod / fleet / operator /
# tools / tests by the prefixes in test/docs/packagemap.go. `make test`
# fails while the map is stale (test/docs TestPackageMap).
set -euo pipefail
cd "$(dirname "$0")/.."
KVPILOT_UPDATE_DOCS=1 go test -count=1 -run '^TestPackageMap$' ./test/docs/
