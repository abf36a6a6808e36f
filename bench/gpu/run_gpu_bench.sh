#!/usr/bin/env bash
# One-shot GPU benchmark for a lent GPU machine (CUDA, cmake, ninja, PyTorch; no internet, no apt,
# no ITK/DCMTK/Qt/oneDNN/protobuf/gtest). Builds the engine-only configuration
# (VOXSEG_WITH_ITK=OFF) against the Debian packages carried in .debs/ (bench/gpu/fetch_debs.sh),
# runs the CUDA unit + gpu tests, then benchmarks voxseg (fp16, bf16) against PyTorch autocast on
# the same ONNX weights, and times a whole-volume sliding window. Every step has a time budget
# and a failing step does not stop the independent ones after it; the whole run stays under
# VOXSEG_BENCH_BUDGET seconds (default 480). See docs/gpu-machine.md.
#
#   bench/gpu/run_gpu_bench.sh             # on the GPU machine; results in $OUT (or ./gpu-bench-out)
#   bench/gpu/run_gpu_bench.sh --dry-run   # here, without a GPU: unpack, configure, build a subset,
#                                          # CPU-only checks (export + import), no timings
#
# Files written to $OUT (at most 8): run.log (everything, set -x), env.txt, build.log, tests.txt,
# torch.json, voxseg.json, summary.md (with the official-size nnInteractive network's figures,
# whose JSON stays in $WORK/resencl: the device tool returns 8 files at most).
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-bench-out}
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
BUDGET=${VOXSEG_BENCH_BUDGET:-480}
# Which of the GPU steps run (a shorter second call): any of tests, torch, voxseg, resencl.
STEPS=",${VOXSEG_BENCH_STEPS:-tests,torch,voxseg,resencl},"
wants() { [[ "$STEPS" == *",$1,"* ]]; }
JOBS=${VOXSEG_BENCH_JOBS:-16}
START=$(date +%s)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
set -x

WORK=${VOXSEG_BENCH_WORK:-/tmp/voxseg-gpu-bench}
PFX=$WORK/prefix
BUILD=$WORK/build
MODEL=$WORK/model
mkdir -p "$WORK" "$MODEL"

export ROOT OUT DRY WORK PFX BUILD MODEL JOBS
declare -A STEP_RC
remaining() { echo $((BUDGET - ($(date +%s) - START))); }
# step NAME SECONDS CMD...: runs CMD with min(SECONDS, time left - 15 s), records its status.
step() {
    local name=$1 want=$2
    shift 2
    local left
    left=$(($(remaining) - 15))
    local t=$((want < left ? want : left))
    if [ "$t" -le 5 ]; then
        echo "STEP $name SKIPPED: out of time budget"
        STEP_RC[$name]=skipped
        return 1
    fi
    echo "===== STEP $name (budget ${t}s, elapsed $(($(date +%s) - START))s) ====="
    local s0 rc
    s0=$(date +%s)
    if declare -F "$1" >/dev/null; then
        # A shell function (exported with export -f): run it in a child bash under timeout.
        timeout -k 5 "$t" bash -c "$*"
        rc=$?
    else
        timeout -k 5 "$t" "$@"
        rc=$?
    fi
    echo "===== STEP $name rc=$rc in $(($(date +%s) - s0))s ====="
    STEP_RC[$name]=$rc
    return $rc
}

# ---- 1. environment ----
env_report() {
    {
        date -u
        uname -a
        cat /etc/os-release 2>/dev/null | head -3
        nvidia-smi 2>&1 | head -20
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv 2>&1
        command -v nvcc && nvcc --version | tail -2
        cmake --version | head -1
        ninja --version
        c++ --version | head -1
        python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())'
        nproc
        free -g | head -2
    } >"$OUT/env.txt" 2>&1
    cat "$OUT/env.txt"
}
export -f env_report
step env 60 env_report

# ---- 2. Debian packages into a prefix (never into /) ----
step unpack 60 python3 "$ROOT/bench/gpu/unpack_debs.py" "$PFX" "$ROOT"/.debs/pkgs/*.deb >/dev/null
LIBDIR=$PFX/usr/lib/x86_64-linux-gnu
CMDIR=$LIBDIR/cmake

# ---- 3. CUDA compiler and cuDNN (system, else PyTorch's nvidia-cudnn wheel + carried headers) ----
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
CUDA_LIB=""
[ -n "$NVCC" ] && CUDA_LIB=$(cd "$(dirname "$NVCC")/.." && pwd)/lib64
CUDNN_INC=""
CUDNN_LIB=""
for d in /usr/local/cuda /usr; do
    lib=$(ls $d/lib64/libcudnn.so.9* $d/lib/x86_64-linux-gnu/libcudnn.so.9* 2>/dev/null | head -1)
    inc=$(ls $d/include/cudnn.h $d/include/x86_64-linux-gnu/cudnn.h 2>/dev/null | head -1)
    if [ -n "$lib" ] && [ -n "$inc" ]; then
        CUDNN_LIB=$lib
        CUDNN_INC=$(dirname "$inc")
        break
    fi
done
NV_LIBS=""
if [ -z "$CUDNN_LIB" ] && [ "$DRY" = 0 ]; then
    CUDNN_PY=$(python3 -c 'import nvidia.cudnn as m, os; print(list(m.__path__)[0])' 2>/dev/null || true)
    if [ -n "$CUDNN_PY" ]; then
        CUDNN_LIB=$(ls "$CUDNN_PY"/lib/libcudnn.so.9* "$CUDNN_PY"/lib/libcudnn.so 2>/dev/null | head -1)
        [ -f "$CUDNN_PY/include/cudnn.h" ] && CUDNN_INC=$CUDNN_PY/include
    fi
    if [ -z "$CUDNN_LIB" ]; then
        CUDNN_LIB=$(timeout 30 find / -xdev -name 'libcudnn.so.9*' 2>/dev/null | head -1)
    fi
    NV_LIBS=$(python3 -c 'import nvidia, glob, os; print(":".join(sorted({os.path.dirname(p) for b in nvidia.__path__ for p in glob.glob(b + "/*/lib/*.so*")})))' 2>/dev/null || true)
fi
[ -z "$CUDNN_INC" ] && CUDNN_INC=$ROOT/.debs/cudnn-include
echo "nvcc=$NVCC cudnn_lib=$CUDNN_LIB cudnn_include=$CUDNN_INC"
[ -n "$CUDNN_LIB" ] && ls -la "$(dirname "$CUDNN_LIB")" | grep -i cudnn | head
# PyTorch brings its own cuDNN (nvidia-cudnn wheel): its steps run with the machine's own
# LD_LIBRARY_PATH, or a system cuDNN of another version found first stops torch.backends.cudnn.
TORCH_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
export TORCH_LD_LIBRARY_PATH
export LD_LIBRARY_PATH="$LIBDIR${CUDA_LIB:+:$CUDA_LIB}${CUDNN_LIB:+:$(dirname "$CUDNN_LIB")}${NV_LIBS:+:$NV_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PFX/usr/bin:$PATH"

# ---- 4. configure + build the engine-only configuration ----
configure() {
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DVOXSEG_WITH_ITK=OFF -DVOXSEG_WITH_QT=OFF -DVOXSEG_WITH_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 ${NVCC:+-DCMAKE_CUDA_COMPILER=$NVCC} \
        -DCMAKE_PREFIX_PATH="$PFX/usr" \
        -Dfmt_DIR="$CMDIR/fmt" -Ddnnl_DIR="$CMDIR/dnnl" -DONNX_DIR="$CMDIR/ONNX" \
        -DGTest_DIR="$CMDIR/GTest" -Dnlohmann_json_DIR="$PFX/usr/share/cmake/nlohmann_json" \
        -DProtobuf_INCLUDE_DIR="$PFX/usr/include" -DProtobuf_LIBRARY="$LIBDIR/libprotobuf.so" \
        -DProtobuf_PROTOC_EXECUTABLE="$PFX/usr/bin/protoc" \
        -DOpenCL_INCLUDE_DIR="$PFX/usr/include" -DOpenCL_LIBRARY="$LIBDIR/libOpenCL.so" \
        -DCUDNN_INCLUDE_DIR="$CUDNN_INC" ${CUDNN_LIB:+-DCUDNN_LIBRARY=$CUDNN_LIB}
}
# The engine's parity tables and goldens have a cuda row each (skipped without a GPU).
ENGINE_TESTS="test_op_parity test_golden test_network_golden test_transformer_golden"
TARGETS="voxseg_gpu_bench test_cuda_math test_cuda_backend $ENGINE_TESTS"
wants tests || TARGETS="voxseg_gpu_bench"
[ "$DRY" = 1 ] && TARGETS="voxseg_gpu_bench test_cuda_math"
build() {
    cmake --build "$BUILD" -j "$JOBS" --target $TARGETS
}
export TARGETS NVCC CUDNN_INC CUDNN_LIB LIBDIR CMDIR
export -f configure build
# The ONNX export needs only the CPU: run it while the build compiles.
LD_LIBRARY_PATH="$TORCH_LD_LIBRARY_PATH" python3 "$ROOT/bench/gpu/torch_unet.py" --workdir "$MODEL" --export-only >"$WORK/export.log" 2>&1 &
EXPORT_PID=$!
{ step configure 120 configure && step build "${VOXSEG_BENCH_BUILD_BUDGET:-300}" build; } >"$OUT/build.log" 2>&1
BUILD_RC=$?
tail -40 "$OUT/build.log"
grep -E "CUDNN|cudnn|dnnl_DIR|ONNX_DIR|Protobuf_LIBRARY" "$BUILD/CMakeCache.txt" 2>/dev/null | head -12
wait $EXPORT_PID
echo "export rc=$?"
cat "$WORK/export.log" | tail -5

BENCH=$BUILD/bench/gpu/voxseg_gpu_bench
if [ "$DRY" = 1 ]; then
    step unit_tests 300 "$BUILD/tests/cuda/test_cuda_math" >"$OUT/tests.txt" 2>&1
    tail -5 "$OUT/tests.txt"
    step import 120 "$BENCH" --onnx "$MODEL/unet.onnx" --import-only --json "$OUT/voxseg.json"
    step device_error 60 "$BENCH" --onnx "$MODEL/unet.onnx" --volume 0 --batches 1
else
    # ---- 5. tests: CUDA math (unit) and device tests (gpu) ----
    run_tests() {
        "$BUILD/tests/cuda/test_cuda_math" --gtest_brief=1
        local r1=$?
        "$BUILD/tests/cuda/test_cuda_backend" --gtest_brief=1
        local r2=$?
        local r3=0 t
        for t in $ENGINE_TESTS; do
            "$BUILD/tests/engine/$t" --gtest_brief=1 --gtest_filter='*cuda*' || r3=1
        done
        return $((r1 != 0 || r2 != 0 || r3 != 0))
    }
    export BUILD ENGINE_TESTS
    export -f run_tests
    run_tests_step() {
        step tests 150 run_tests >"$OUT/tests.txt" 2>&1
        tail -40 "$OUT/tests.txt"
    }
    TESTS_DONE=0
    # device_session.sh trains a model on the GPU during the build; time only once it is done.
    if [ -n "${VOXSEG_BENCH_WAIT_FOR:-}" ]; then
        # The tests need the GPU but no idle one: run them while the training still holds it.
        if wants tests && [ ! -e "$VOXSEG_BENCH_WAIT_FOR" ]; then
            run_tests_step
            TESTS_DONE=1
        fi
        echo "waiting for $VOXSEG_BENCH_WAIT_FOR before timing"
        while [ ! -e "$VOXSEG_BENCH_WAIT_FOR" ] && [ "$(remaining)" -gt 240 ]; do sleep 2; done
        echo "wait over after $(($(date +%s) - START))s (file present: $([ -e "$VOXSEG_BENCH_WAIT_FOR" ] && echo yes || echo no))"
    fi
    # ---- 6. PyTorch peer (same weights), then voxseg, on an otherwise idle machine ----
    wants torch && step torch 150 env LD_LIBRARY_PATH="$TORCH_LD_LIBRARY_PATH" PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/torch_unet.py" --workdir "$MODEL" \
        --skip-export --batches 1,2,4,8 --seconds 1.5 --json "$OUT/torch.json"
    wants voxseg && step voxseg 180 "$BENCH" --onnx "$MODEL/unet.onnx" --check-input "$MODEL/check_input.f32" \
        --check-logits "$MODEL/check_fp32_logits.f32" --precisions fp16,bf16,int8,fp8 --batches 1,2,4,8 \
        --seconds 1.5 --volume 256 --json "$OUT/voxseg.json"
    [ "$TESTS_DONE" = 0 ] && wants tests && run_tests_step
    # ---- 6b. the official-size nnInteractive network (issue 38: <= 60 ms per point click),
    # after the tests, with the time left ----
    RESENCL=$WORK/resencl
    wants resencl && step resencl_torch 150 env LD_LIBRARY_PATH="$TORCH_LD_LIBRARY_PATH" PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/torch_resencl.py" \
        --workdir "$RESENCL" --seconds 2 --json "$RESENCL/torch.json" &&
        step resencl_voxseg 120 "$BENCH" --onnx "$RESENCL/resencl.onnx" --input-shape 8,192,192,192 \
            --precisions bf16,fp16 --batches 1 --seconds 2 --volume 0 --json "$RESENCL/voxseg.json"
fi

# ---- 7. summary ----
python3 "$ROOT/bench/gpu/summarize.py" "$OUT/torch.json" "$OUT/voxseg.json" \
    "$WORK/resencl/torch.json" "$WORK/resencl/voxseg.json" >"$OUT/summary.md" 2>&1
{
    echo
    echo "## Steps"
    for k in "${!STEP_RC[@]}"; do echo "- $k: rc ${STEP_RC[$k]}"; done
    echo "- total: $(($(date +%s) - START)) s (budget $BUDGET s, dry run $DRY)"
} >>"$OUT/summary.md"
cat "$OUT/summary.md"
exit 0
