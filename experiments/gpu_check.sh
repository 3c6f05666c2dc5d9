#!/usr/bin/env bash
# GPU check (issue #3): the whole test suite on CUDA plus a short throughput run, in one script.
# Usage on a CUDA machine, from the repository root:  bash experiments/gpu_check.sh [OUT_DIR]
# Writes OUT_DIR/gpu_check.txt (default experiments/results/gpu); commit it with the machine noted.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-experiments/results/gpu}"
mkdir -p "$out"
log="$out/gpu_check.txt"
{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
  python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'CUDA is not available: nothing to check')"
  echo "## test suite on CUDA (device auto -> cuda)"
  python -m pytest -m "slow or not slow" -q -x 2>&1 | tail -5
  echo "## throughput: HalfCheetah-v5, 100k steps, ppo and dapo, 1 and 16 envs, cuda vs cpu"
  for dev in cuda cpu; do
    for envs in 1 16; do
      for algo in ppo dapo; do
        run="$(mktemp -d)/r"
        python -m core run --env HalfCheetah-v5 --algo "$algo" --num-envs "$envs" --num-steps $((2048 / envs)) \
          --total-steps 100000 --device "$dev" --run-dir "$run" --no-progress --no-tensorboard --eval-episodes 0 \
          2>/dev/null | sed "s/^/[$dev x$envs] /"
      done
    done
  done
} 2>&1 | tee "$log"
