#!/usr/bin/env bash
# One call on a lent GPU machine: trains the hippocampus demo model on the GPU while the
# benchmark builds (CPU), then lets run_gpu_bench.sh time on an idle GPU once training is done.
#
#   here:   python3 tools/prepare_hippocampus.py --out .gpu_carry/hippo.npz   (git-ignored)
#           bash bench/gpu/fetch_debs.sh
#   device: run(command="bash bench/gpu/device_session.sh", carry=[".debs", ".gpu_carry"])
#
# $OUT gets the benchmark's files (see docs/gpu-machine.md) plus hippo.tar (model.onnx,
# model.json, training.json, train.log). Without .gpu_carry/hippo.npz it only benchmarks.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export OUT=${OUT:-$ROOT/gpu-session-out}
mkdir -p "$OUT"
TRAIN_MIN=${VOXSEG_TRAIN_MINUTES:-3}
DONE=/tmp/voxseg-train.done
rm -f "$DONE"
if [ -f "$ROOT/.gpu_carry/hippo.npz" ]; then
    (
        cd "$ROOT" || exit 1
        mkdir -p /tmp/hippo-model
        PYTHONUNBUFFERED=1 timeout $((TRAIN_MIN * 60 + 150)) python3 tools/train_hippocampus.py \
            --data .gpu_carry/hippo.npz --out /tmp/hippo-model --iters 1000000 --batch 32 \
            --minutes "$TRAIN_MIN" >/tmp/hippo-model/train.log 2>&1
        echo "exit status $?" >>/tmp/hippo-model/train.log
        tar -C /tmp -cf "$OUT/hippo.tar" hippo-model
        touch "$DONE"
    ) &
else
    touch "$DONE"
fi
VOXSEG_BENCH_WAIT_FOR=$DONE VOXSEG_BENCH_BUDGET=${VOXSEG_BENCH_BUDGET:-540} \
    bash "$ROOT/bench/gpu/run_gpu_bench.sh"
wait
