#!/bin/bash
# The GPU figures of one GPU node, in one go (at most 8 minutes on a 16-core H100 node):
#   1. the GPU tests (`pytest -m gpu`): the inference server's CUDA path, the learner's step and
#      self-play on CUDA, so the figures below rest on tests that pass on this machine;
#   2. inference: the network evaluator against the raw forward pass (4x16, 6x64);
#   3. the inference server: evaluations/s through it against the raw forward pass of the same
#      network in the same run, then self-play positions/s with the server on (15 search
#      processes) and off (4 processes with the network on the GPU, as actors ran before);
#   4. the gpu preset (its inference server on) for the minutes that are left (default 1.25),
#      W&B off: whether the learner still waits for self-play at the sample ratio.
# GPU utilisation is sampled with nvidia-smi during every stage (OUT_DIR/<stage>.smi.csv; the
# mean is in the summary) and, in stage 3, during each measured phase.
# Each stage is bounded by `timeout` and logs to OUT_DIR/<stage>.log; the run directory is
# OUT_DIR/gpurun. Usage: scripts/gpu_figures.sh OUT_DIR [LEARNER_MINUTES]
set -u
OUT_DIR=${1:?usage: scripts/gpu_figures.sh OUT_DIR [LEARNER_MINUTES]}
MINUTES=${2:-1.25}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT_DIR/summary.txt"; }
stage() {
  local name=$1 limit=$2; shift 2
  log "start $name (limit $limit s)"
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits \
    -lms 500 > "$OUT_DIR/$name.smi.csv" 2>/dev/null &
  local smi=$!
  timeout -k 10 "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1
  local rc=$?
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  local util
  util=$(awk -F', ' '{s += $2; n++} END {if (n) printf "%.0f%% mean over %d samples", s / n, n}' \
    "$OUT_DIR/$name.smi.csv")
  log "end $name rc=$rc; GPU utilisation ${util:-not sampled}"
  tail -20 "$OUT_DIR/$name.log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  | tee -a "$OUT_DIR/summary.txt"
log "$(nproc) CPUs; $($PY -c 'import torch; print("torch", torch.__version__)')"
stage gpu_tests 100 $PY -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider
stage inference 50 $PY benchmarks/inference.py --device cuda --models 4x16,6x64 \
  --batches 1024,4096 --seconds 1
stage inference_server 200 $PY benchmarks/inference_server.py --device cuda --clients 15 \
  --actors 15 --off-actors 4 --seconds 20 --warmup 10
LIMIT=$($PY -c "print(int($MINUTES * 60 + 60))")
stage learner "$LIMIT" $PY -m learner preset=gpu learner.time_limit_min="$MINUTES" \
  logging.wandb.mode=disabled run_dir="$OUT_DIR/gpurun"
log "done"
