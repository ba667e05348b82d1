#!/usr/bin/env bash
# The node's Float8 training step (steps.py `fsdp-float8`: torchao Float8 linears, FP8 all-gather, each
# decoder layer compiled) and the bf16 step it is compared with (`fsdp`), on every GPU of this host at the
# extended level's sizes (8 layers, 2 x 8192 tokens per GPU), once per PHASE, outputs under OUT:
#   check   the rank program alone (torchrun), 3 warm-up and 20 timed steps: N-check.json, its verdict lines
#   eager   the same with torch.compile off (TORCHDYNAMO_DISABLE=1): what the compile adds, or a fallback
#   update  the suite's two steps with --update-baselines (the level's 5 + 30 steps; three runs fold a baseline)
# usage: benchmarks/float8_step_gpu.sh OUT PHASE...
set -u
out=$1
shift
export PYTHONUNBUFFERED=1
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
n=0
for phase in "$@"; do
  n=$((n + 1))
  start=$(date +%s)
  case $phase in
    check | eager)
      [ "$phase" = eager ] && export TORCHDYNAMO_DISABLE=1
      torchrun --standalone --nproc-per-node "$gpus" -m rocm_validate.collectives.training --level extended \
        --jobs fsdp,fsdp-float8 --warmup 3 --steps 20 --out "$out/$n-$phase.json" >"/tmp/$n-$phase.log" 2>&1
      rc=$?
      unset TORCHDYNAMO_DISABLE
      python3 -c "import json, sys; print('phase_s', [r and r['phase_s'] for r in json.load(open(sys.argv[1]))['results']])" \
        "$out/$n-$phase.json" >>"/tmp/$n-$phase.log" 2>&1 ;;
    update)
      ROCM_VALIDATE_TRAINING_JOBS=fsdp,fsdp-float8 python3 -m pytest suites/collectives/test_training.py \
        --rocm-level=extended --rocm-device=all --rocm-suite=collectives --rocm-report="$out/$n-$phase.json" \
        --basetemp="/tmp/bt-f8-$n" -p no:cacheprovider -rA -q --update-baselines >"/tmp/$n-$phase.log" 2>&1
      rc=$? ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
  { echo "=== $n $phase rc=$rc $(( $(date +%s) - start )) s"; cat "/tmp/$n-$phase.log"; } >>"$out/runs.log"
  echo "=== $n $phase rc=$rc $(( $(date +%s) - start )) s"
  grep -E "^(fsdp|rocm-validate|phase_s)|passed|failed|skipped|SKIPPED|FAILED|Error" "/tmp/$n-$phase.log" | tail -12
done
cp baselines/nvidia-h200-sm90.json "$out/" 2>/dev/null
exit 0
