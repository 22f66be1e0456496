#!/bin/bash
# The GPU figures of one GPU node, in one go (about 9 minutes on a 16-core H100 node):
#   1. inference: the network evaluator against the raw forward pass (4x16, 4x32, 6x64);
#   2. learner: end-to-end training samples/s against the raw step (6x64, batch 2048);
#   3. self-play: 4 actors on a quarter of the GPU each (real Ray and Redis);
#   4. the gpu preset for the minutes that are left (default 4.5), W&B off.
# Each stage is bounded by `timeout` and logs to OUT_DIR/<stage>.log; the run directory is
# OUT_DIR/gpurun. Usage: scripts/gpu_figures.sh OUT_DIR [LEARNER_MINUTES]
set -u
OUT_DIR=${1:?usage: scripts/gpu_figures.sh OUT_DIR [LEARNER_MINUTES]}
MINUTES=${2:-4.5}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT_DIR/summary.txt"; }
stage() {
  local name=$1 limit=$2; shift 2
  log "start $name (limit $limit s)"
  timeout -k 10 "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1
  log "end $name rc=$?"
  tail -20 "$OUT_DIR/$name.log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  | tee -a "$OUT_DIR/summary.txt"
log "$(nproc) CPUs; $($PY -c 'import torch; print("torch", torch.__version__)')"
stage inference 75 $PY benchmarks/inference.py --device cuda --models 4x16,4x32,6x64 \
  --batches 256,1024,4096 --seconds 1.5
stage training 90 $PY benchmarks/training.py --device cuda --games 300 --seconds 8 --rounds 2 \
  --set model.blocks=6 --set model.channels=64 --set learner.batch_size=2048
stage selfplay_gpu 80 $PY benchmarks/selfplay.py --device cuda --actors 4 --warmup 15 \
  --seconds 25 --no-bare --num-cpus "$(nproc)"
LIMIT=$($PY -c "print(int($MINUTES * 60 + 60))")
stage learner "$LIMIT" $PY -m learner preset=gpu learner.time_limit_min="$MINUTES" \
  logging.wandb.mode=disabled run_dir="$OUT_DIR/gpurun"
log "done"
