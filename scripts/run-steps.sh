#!/usr/bin/env bash
# Runs named steps one after another, each to its end whether or not an
# earlier one failed, and prints a summary: each step's result (PASS, FAIL,
# SKIPPED, NOT RUN, INTERRUPTED) and how long it took. Exits 1 if any step
# failed, 0 otherwise; 130 when interrupted (Ctrl-C), after the summary.
# `make test` and `make test-stress` call it (Makefile).
#
#   run-steps.sh [--title TEXT] [--load N] [--load-seconds S] NAME CMD [NAME CMD ...]
#
# CMD runs under `bash -c` with its output on the terminal. A step whose
# command exits 77 is SKIPPED (the automake convention), not failed.
# --load N starts N busy-loop processes that compete for the CPUs while the
# steps run; each stops by itself after S seconds (default 3600) and is
# killed when this script ends, however it ends.
set -uo pipefail

title=steps
load=0
load_seconds=3600
while [ $# -gt 0 ]; do
  case $1 in
    --title) title=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --load-seconds) load_seconds=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "run-steps.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $(( $# % 2 )) -ne 0 ] || [ $# -eq 0 ]; then
  echo "run-steps.sh: want NAME CMD pairs" >&2; exit 2
fi

names=() cmds=()
while [ $# -gt 0 ]; do names+=("$1"); cmds+=("$2"); shift 2; done
results=() times=()
loaders=()
current='' t0=$SECONDS
start=$SECONDS

fmt() { printf '%dm%02ds' $(( $1 / 60 )) $(( $1 % 60 )); }

stop_load() {
  local pid
  for pid in "${loaders[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${loaders[@]}"; do wait "$pid" 2>/dev/null; done
  loaders=()
}

summary() {
  local i failed=0 passed=0 skipped=0 notrun=0 r
  echo
  echo "== $title: summary"
  for i in "${!names[@]}"; do
    r=${results[$i]:-NOT RUN}
    case $r in
      PASS) passed=$((passed + 1)) ;;
      SKIPPED) skipped=$((skipped + 1)) ;;
      "NOT RUN") notrun=$((notrun + 1)) ;;
      *) failed=$((failed + 1)) ;;
    esac
    if [ "$r" = "NOT RUN" ]; then
      printf '  %-16s %-28s\n' "$r" "${names[$i]}"
    else
      printf '  %-16s %-28s %s\n' "$r" "${names[$i]}" "$(fmt "${times[$i]}")"
    fi
  done
  printf '== %s: %d passed, %d failed, %d skipped' "$title" "$passed" "$failed" "$skipped"
  [ "$notrun" -gt 0 ] && printf ', %d not run' "$notrun"
  printf ' in %s\n' "$(fmt $((SECONDS - start)))"
  [ "$failed" -eq 0 ]
}

interrupted() {
  trap - INT TERM
  if [ -n "$current" ] && [ -z "${results[$current]:-}" ]; then
    results[$current]=INTERRUPTED
    times[$current]=$((SECONDS - t0))
  fi
  stop_load
  echo; echo "== $title: interrupted"
  summary
  exit 130
}
trap interrupted INT TERM
trap stop_load EXIT

if [ "$load" -gt 0 ]; then
  echo "== $title: $load busy loops compete for the CPUs (at most ${load_seconds}s)"
  for _ in $(seq "$load"); do
    ( end=$((SECONDS + load_seconds)); while [ $SECONDS -lt "$end" ]; do :; done ) &
    loaders+=($!)
  done
fi

for i in "${!names[@]}"; do
  echo
  echo "== $title: ${names[$i]}: ${cmds[$i]}"
  t0=$SECONDS current=$i
  bash -c "${cmds[$i]}"
  rc=$?
  times[$i]=$((SECONDS - t0))
  case $rc in
    0) results[$i]=PASS ;;
    77) results[$i]=SKIPPED ;;
    130) results[$i]="FAIL (exit 130)"; interrupted ;;
    *) results[$i]="FAIL (exit $rc)" ;;
  esac
  echo "== $title: ${names[$i]}: ${results[$i]} in $(fmt "${times[$i]}")"
done

stop_load
summary || exit 1
