#!/usr/bin/env bash
# Runs every Go fuzz target for a few seconds (FUZZTIME, default 3s).
# A run that ends with the fuzzer's own "context deadline exceeded" and no
# failing input is the Go 1.26 fuzz coordinator's race at the end of a
# duration -fuzztime (golang/go#75804, fixed in Go 1.27): it is retried, up
# to twice. A real failure writes its input under testdata/fuzz ("Failing
# input written") and fails at once.
set -euo pipefail
fuzztime=${FUZZTIME:-3s}
# The targets are found in the source (func FuzzX in a _test.go file), not
# with go test -list, which would build the test binary of every package.
targets=$(grep -rH --include='*_test.go' --exclude-dir=node_modules -E '^func Fuzz[A-Za-z0-9_]*\(' . |
  sed -E 's#^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | sort -u)
if [ -z "$targets" ]; then echo "fuzz-smoke: no fuzz targets found" >&2; exit 1; fi
n=0
while read -r dir target; do
  pkg=./$dir
  n=$((n + 1))
  log=$(mktemp)
  for attempt in 1 2 3; do
    echo "fuzz $pkg $target ($fuzztime)"
    if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 200x "$pkg" >"$log" 2>&1; then
      break
    fi
    if [ "$attempt" -lt 3 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
      echo "  fuzz coordinator timed out without a failing input (golang/go#75804); retrying"
      continue
    fi
    cat "$log"; rm -f "$log"; exit 1
  done
  rm -f "$log"
done <<<"$targets"
echo "fuzz-smoke: $n targets passed"
