#!/usr/bin/env bash
# On a machine with NVIDIA GPUs, three checks of the embedded master:
#  1. a worker asking for one GPU (-Gw 1) sees exactly one, a task without
#     GPUs (the chief) none;
#  2. a task on an agent that has no GPUs at all (tfmesos local-master
#     --agent ...,gpus=0) sees none either: CUDA_VISIBLE_DEVICES="" and
#     NVIDIA_VISIBLE_DEVICES=void, as on a separate GPU-less host;
#  3. a worker that uses its GPU has its peak GPU memory (nvidia-smi) in
#     run.json (usage.peak_gpu_mb) and in tfrun's end-of-run table.
# GPUs are counted by the CUDA driver itself (cuDeviceGetCount after
# cuInit), which honours CUDA_VISIBLE_DEVICES; nvidia-smi does not.
# Prints one line per task and exits non-zero when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" MESOS_MASTER=
nvidia-smi -L
out=$(mktemp -d)
master_pid=
cleanup() {
  [ -n "$master_pid" ] && kill "$master_pid" 2>/dev/null && wait "$master_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

cat > "$out/count.py" <<'EOF'
import ctypes
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    print(0)
else:
    count = ctypes.c_int(0)
    ok = cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0
    print(count.value if ok else 0)
EOF
count="python3 $out/count.py"

echo "== 1. a worker with one GPU, a chief with none"
python3 -m tfmesos.cli.tfrun -c -w 1 -s 0 -Gw 1 -Cw 0.5 -Cc 0.5 --launch-timeout 60 -- \
  "echo {job_name}:{task_index} CUDA_VISIBLE_DEVICES=[\$CUDA_VISIBLE_DEVICES] visible=\$($count) > $out/gpu-{job_name}.txt; cat $out/gpu-{job_name}.txt; [ {job_name} = chief ] && sleep 3; true"
cat "$out"/gpu-*.txt
grep -q "worker:0 CUDA_VISIBLE_DEVICES=\[[0-9]\] visible=1$" "$out/gpu-worker.txt"
grep -q "chief:0 CUDA_VISIBLE_DEVICES=\[\] visible=0$" "$out/gpu-chief.txt"

echo "== 2. a task on an agent without GPUs"
python3 -m mesos_local --port 0 --agent cpus=2,mem=4096,gpus=0 --log-level warning \
  > "$out/master.txt" 2>&1 &
master_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$out/master.txt" && break; sleep 0.1; done
url=$(sed -n 's/.*listening on //p' "$out/master.txt" | head -1)
[ -n "$url" ] || { cat "$out/master.txt"; echo "the GPU-less master did not start"; exit 1; }
python3 -m tfmesos.cli.tfrun -m "${url#http://}" -w 1 -s 0 -Cw 0.5 --launch-timeout 60 -- \
  "echo gpuless CUDA_VISIBLE_DEVICES=[\$CUDA_VISIBLE_DEVICES] NVIDIA_VISIBLE_DEVICES=[\$NVIDIA_VISIBLE_DEVICES] visible=\$($count) > $out/gpuless.txt"
cat "$out/gpuless.txt"
grep -q "^gpuless CUDA_VISIBLE_DEVICES=\[\] NVIDIA_VISIBLE_DEVICES=\[void\] visible=0$" \
  "$out/gpuless.txt"
kill "$master_pid"; wait "$master_pid" 2>/dev/null || true; master_pid=

echo "== 3. peak GPU memory of a worker that uses its GPU"
# TensorFlow where it is installed, else PyTorch (a GPU machine's image may
# hold only one of them)
if python3 -c "import tensorflow" 2>/dev/null; then
  uses_gpu="import time, tensorflow as tf
x = tf.random.normal((8192, 8192))
for _ in range(20):
    x = tf.linalg.normalize(tf.matmul(x, x))[0]
print(float(tf.reduce_sum(x)))
time.sleep(4)"
else
  uses_gpu="import time, torch
x = torch.randn(8192, 8192).cuda()
for _ in range(20):
    x = torch.nn.functional.normalize(x @ x, dim=0)
print(float(x.sum()))
time.sleep(4)"
fi
python3 -m tfmesos.cli.tfrun -w 1 -s 0 -Gw 1 -Cw 1 -Mw 8192 --launch-timeout 60 \
  --run-dir "$out/run" -- "python3 -c '$uses_gpu'" 2> "$out/tfrun.txt" || { cat "$out/tfrun.txt"; exit 1; }
sed -n '/resources asked and used/,$p' "$out/tfrun.txt"
python3 - "$out/run/run.json" <<'EOF'
import json, sys
usage = json.load(open(sys.argv[1]))["tasks"][0]["attempts"][-1]["usage"]
print("worker:0 peak_gpu_mb=%s peak_rss_mb=%s cpu_s=%s" % (
    usage["peak_gpu_mb"], usage["peak_rss_mb"], usage["cpu_s"]))
assert usage["peak_gpu_mb"] and usage["peak_gpu_mb"] > 256, usage
EOF
grep -q "GPU [0-9]* MB" "$out/tfrun.txt"
echo "GPU check passed"
