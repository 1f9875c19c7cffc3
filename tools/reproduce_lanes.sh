#!/usr/bin/env bash
# make reproduce LANES=2|3: chapters in lanes that run side by side, one thread each, so every core is busy:
#   bash tools/reproduce_lanes.sh "tabular=tabular" ["baseline=baseline baseline_law"] "others=theory language ..."
# Each argument is NAME=NOTEBOOKS (run in that order by one make notebooks); each lane logs to
# results/paper-run/logs/NAME.log (appended, so a resumed run keeps the earlier lines).  Called by the Makefile
# with SUBMAKE (its make), REPRO_ENV and REPRO_NB in the environment; the summary chapter and publishing follow
# in the Makefile once every lane is done.  Ctrl-C, or one lane failing, stops every lane with what it started
# (each lane is a process group of its own where setsid exists).
set -euo pipefail
logs=results/paper-run/logs
mkdir -p "$logs"
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 SUBMAKE REPRO_ENV REPRO_NB
setsid=$(command -v setsid || true)
names=() pids=()
for spec in "$@"; do
  name=${spec%%=*} nbs=${spec#*=}
  [ -n "$name" ] && [ "$name" != "$spec" ] || { echo "reproduce_lanes: expected NAME=NOTEBOOKS, got '$spec'"; exit 2; }
  [ -n "$nbs" ] || continue  # a lane with nothing to run
  rm -f "$logs/.$name.rc"
  # no command substitution around the lane: that would wait for it to end
  $setsid bash -c 'env $REPRO_ENV $SUBMAKE --no-print-directory notebooks $REPRO_NB NOTEBOOKS="$1" >> "$2" 2>&1
                   echo $? > "$3"' lane "$nbs" "$logs/$name.log" "$logs/.$name.rc" < /dev/null > /dev/null 2>&1 &
  names+=("$name") pids+=("$!")
done
[ ${#names[@]} -gt 0 ] || { echo "=== no lane has a chapter to run"; exit 0; }
echo "=== ${#names[@]} lanes: tail -f $(printf "$logs/%s.log " "${names[@]}")"
stop() { for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done; }
trap 'stop; exit 130' INT TERM

while :; do  # until every lane is done, or one has failed
  done_n=0 failed=()
  for name in "${names[@]}"; do
    rc=$(cat "$logs/.$name.rc" 2>/dev/null || true)
    if [ "$rc" = 0 ]; then done_n=$((done_n + 1)); elif [ -n "$rc" ]; then failed+=("$name"); fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    stop
    for name in "${failed[@]}"; do
      if [ "$name" = tabular ]; then echo "the tabular chapter FAILED: see $logs/$name.log"
      else echo "a chapter FAILED: see $logs/$name.log"; fi
    done
    wait || true
    exit 1
  fi
  [ "$done_n" = ${#names[@]} ] && break
  sleep 2
done
wait || true
echo "=== every lane done"
