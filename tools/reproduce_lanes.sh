#!/usr/bin/env bash
# make reproduce LANES=2: the tabular chapter (its trainings, the longest part) in one lane and the other
# chapters ("$1", in order) in another, one thread each, so both cores are busy; each lane logs to
# results/paper-run/logs/LANE.log.  Called by the Makefile with SUBMAKE (its make), REPRO_ENV and REPRO_NB set; the summary
# chapter and publishing follow in the Makefile once both lanes are done.
set -euo pipefail
others="$1"
logs=results/paper-run/logs
mkdir -p "$logs"
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1
echo "=== two lanes: tail -f $logs/tabular.log $logs/others.log"
env $REPRO_ENV $SUBMAKE --no-print-directory notebooks $REPRO_NB NOTEBOOKS=tabular > "$logs/tabular.log" 2>&1 &
lane_a=$!
if ! env $REPRO_ENV $SUBMAKE --no-print-directory notebooks $REPRO_NB NOTEBOOKS="$others" > "$logs/others.log" 2>&1; then
  echo "a chapter FAILED: see $logs/others.log"
  kill "$lane_a" 2>/dev/null || true
  wait || true
  exit 1
fi
wait "$lane_a" || { echo "the tabular chapter FAILED: see $logs/tabular.log"; exit 1; }
echo "=== both lanes done"
