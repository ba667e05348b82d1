#!/usr/bin/env bash
# The node's training steps (suites/collectives/test_training.py) on every GPU of this host, once
# per PHASE, with their outputs under OUT (at most 8 files, for the device tool's return):
#   update      a run with --update-baselines (three of them fold into the baseline)
#   plant-grad  rank 1's gradient contribution 1% off: parity fails naming rank 1 and its GPU
#   plant-slow  rank 1's all-gathers 5 ms late: the throughput falls, and GPU 1 is named
#   check       a plain run against the committed baselines
# usage: benchmarks/training_steps_gpu.sh OUT PHASE...
set -u
out=$1
shift
export PYTHONUNBUFFERED=1
n=0
for phase in "$@"; do
  n=$((n + 1))
  plants="" extra=""
  case $phase in
    update) extra=--update-baselines ;;
    plant-grad) plants=grad:1:1.01 ;;
    plant-slow) plants=slow:1:5 ;;
    check) ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
  start=$(date +%s)
  ROCM_VALIDATE_TRAINING_PLANTS=$plants python3 -m pytest suites/collectives/test_training.py \
    --rocm-device=all --rocm-suite=collectives --rocm-report="$out/$n-$phase.json" --basetemp="/tmp/bt-$n" \
    -p no:cacheprovider -rA -q $extra >"/tmp/$n-$phase.log" 2>&1
  rc=$?
  { echo "=== $n $phase rc=$rc $(( $(date +%s) - start )) s"; cat "/tmp/$n-$phase.log"; } >>"$out/runs.log"
  echo "=== $n $phase rc=$rc $(( $(date +%s) - start )) s"
  grep -E "passed|failed|FAILED|holds|contributed|allowed|Error" "/tmp/$n-$phase.log" | tail -12
done
cp baselines/nvidia-h200-sm90.json "$out/" 2>/dev/null
tar czf "$out/rank-logs.tgz" /tmp/bt-*/*/training*/ 2>/dev/null
exit 0
