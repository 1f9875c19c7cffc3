#!/usr/bin/env bash
# make reproduce LANES=2 (for a two-core machine): the tabular chapter (its trainings, the longest part) in
# one lane and the other chapters ("$1", in order) in another, one thread each, so both cores are busy; each
# lane logs to results/paper-run/logs/LANE.log (appended, so a resumed run keeps the earlier lines).  Called
# by the Makefile with SUBMAKE (its make), REPRO_ENV and REPRO_NB in the environment; the summary chapter and
# publishing follow in the Makefile once both lanes are done.  Ctrl-C, or one lane failing, stops both lanes
# with what they started (each lane is a process group of its own where setsid exists).
set -euo pipefail
others="$1"
logs=results/paper-run/logs
mkdir -p "$logs"
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 SUBMAKE REPRO_ENV REPRO_NB
setsid=$(command -v setsid || true)
echo "=== two lanes: tail -f $logs/tabular.log $logs/others.log"

lane() {  # lane NAME NOTEBOOKS: one make notebooks in the background, its exit status written to
          # $logs/.NAME.rc; its pid in $pid (no command substitution: that would wait for the lane to end)
  rm -f "$logs/.$1.rc"
  $setsid bash -c 'env $REPRO_ENV $SUBMAKE --no-print-directory notebooks $REPRO_NB NOTEBOOKS="$1" >> "$2" 2>&1
                   echo $? > "$3"' lane "$2" "$logs/$1.log" "$logs/.$1.rc" < /dev/null > /dev/null 2>&1 &
  pid=$!
}
lane tabular tabular; a=$pid
lane others "$others"; b=$pid
stop() { for p in $a $b; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done; }
trap 'stop; exit 130' INT TERM

rc() { cat "$logs/.$1.rc" 2>/dev/null || true; }
while :; do  # until both are done, or one has failed
  ra=$(rc tabular); rb=$(rc others)
  if { [ -n "$ra" ] && [ "$ra" != 0 ]; } || { [ -n "$rb" ] && [ "$rb" != 0 ]; }; then
    stop
    [ -n "$ra" ] && [ "$ra" != 0 ] && echo "the tabular chapter FAILED: see $logs/tabular.log"
    [ -n "$rb" ] && [ "$rb" != 0 ] && echo "a chapter FAILED: see $logs/others.log"
    wait || true
    exit 1
  fi
  [ "$ra" = 0 ] && [ "$rb" = 0 ] && break
  sleep 2
done
wait || true
echo "=== both lanes done"
