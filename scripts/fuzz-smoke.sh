#!/usr/bin/env bash
# Runs every Go fuzz target for a few seconds (FUZZTIME, default 3s).
set -euo pipefail
fuzztime=${FUZZTIME:-3s}
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 200x "$pkg" >/tmp/fuzz-$target.log 2>&1 || { cat /tmp/fuzz-$target.log; exit 1; }
  done
done
