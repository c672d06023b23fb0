#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: a worker asking for one GPU (-Gw 1) on the
# embedded master must see exactly one, and a task without GPUs none.
# Prints one line per task and exits non-zero when either sees the wrong count.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi -L
out=$(mktemp -d)
count='python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || nvidia-smi -L | wc -l'
MESOS_MASTER= python3 -m tfmesos.cli.tfrun -c -w 1 -s 0 -Gw 1 -Cw 0.5 -Cc 0.5 --launch-timeout 60 -- \
  "echo {job_name}:{task_index} CUDA_VISIBLE_DEVICES=[\$CUDA_VISIBLE_DEVICES] visible=\$($count) > $out/gpu-{job_name}.txt; cat $out/gpu-{job_name}.txt; [ {job_name} = chief ] && sleep 3; true"
cat "$out"/gpu-*.txt
grep -q "worker:0 CUDA_VISIBLE_DEVICES=\[[0-9]\] visible=1$" "$out/gpu-worker.txt"
grep -q "chief:0 CUDA_VISIBLE_DEVICES=\[\] visible=0$" "$out/gpu-chief.txt"
echo "GPU check passed"
