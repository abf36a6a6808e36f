// The CPU backend on oneDNN: runs a Graph with oneDNN primitives (convolution, deconvolution,
// pooling, resampling, eltwise, binary, concat, softmax, reorder) plus vectorised kernels of
// its own for instance/group normalisation over oneDNN's blocked layouts.
//
// compile() applies optimize(), lets convolutions pick their layout (nCdhw16c, ...) and keeps
// that layout between layers (reorders only where a consumer needs another one, normally only
// at graph inputs and outputs), fuses bias/activation/residual into convolutions as post-ops and
// activations into normalisations, and plans one activation arena whose buffers are reused by
// liveness. Precision: fp32 (default) or bf16 activations/weights with fp32 accumulation and
// fp32 normalisation statistics, the latter only where the CPU has avx512_bf16. "auto" is bf16
// on CPUs with AMX and on AMD CPUs with avx512_bf16, else fp32 (cpuAutoPrecision). Precision
// int8 (docs/int8.md) runs the Convs that the package's calibration covers as oneDNN int8
// convolutions (conv_int8.h; which ones: engine/quant/int8_policy.h) and the rest in fp32, or
// bf16 where auto would pick it (cpuInt8FloatPrecision); it
// needs CompileOptions::quantization and weight bits the CPU multiplies exactly (cpuInt8Support).
//
// Threads: oneDNN's OpenMP runtime; CompileOptions::num_threads (0 = all cores) is applied with
// omp_set_num_threads on the thread that compiles and on the thread that runs.
// Thread safety: as backend.h (the Backend may be shared; a CompiledGraph is single-threaded).
#pragma once

#include "engine/backend.h"

#include <memory>

namespace voxseg::engine {

std::unique_ptr<Backend> makeCpuBackend();

// What the cpu backend's "auto" precision depends on: AMX tiles with bf16 (amx_bf16, as oneDNN
// detects it), avx512_bf16, and the vendor (CPUID "AuthenticAMD").
struct CpuBf16Traits {
    bool amx_bf16 = false;
    bool avx512_bf16 = false;
    bool amd = false;
};

// The cpu backend's "auto" precision (Backend::autoPrecision): bf16 with AMX, and on AMD CPUs
// with avx512_bf16 (Zen 4 and later: bf16 measured 1.5-1.9x fp32 on the four network families);
// fp32 on Intel's avx512_bf16 without AMX, where bf16 measured slower (docs/perf-cpu.md,
// "Precision"), and without bf16 instructions. A pure function, so every branch is tested on
// any machine.
PrecisionChoice cpuAutoPrecision(const CpuBf16Traits& cpu);

// The precision of an int8 plan's float parts (normalisations, concat, ConvTranspose, the
// float_layers, and the int8 convolutions' results that float layers read): the CPU's auto
// precision, bf16 where cpuAutoPrecision picks it (AMX, AMD Zen 4), else fp32. On AMX the float
// parts take most of an int8 network's time and bf16 halves their bytes (docs/int8.md). The
// first overload is pure (tested on any machine), the second this CPU's.
Precision cpuInt8FloatPrecision(const CpuBf16Traits& cpu);
Precision cpuInt8FloatPrecision();

// What decides the int8 weight range a CPU multiplies exactly (docs/int8.md): VNNI dot products,
// 4 u8 x s8 products straight into s32 (avx512_vnni; avx_vnni on AVX2 CPUs), or AMX tiles with
// int8 (amx_int8). Without them oneDNN's int8 kernels add pairs of products into a saturating
// s16 (AVX2's vpmaddubsw), exact only for weights within +-63.
struct CpuInt8Traits {
    bool avx512_vnni = false;
    bool avx_vnni = false;
    bool amx_int8 = false;
};
// This CPU's, as oneDNN's effective ISA reports them (DNNL_MAX_CPU_ISA caps them).
CpuInt8Traits cpuInt8Traits();
// The weight bits the CPU's int8 kernels multiply exactly: 8 with VNNI or AMX, 7 without.
int cpuInt8WeightBits(const CpuInt8Traits& cpu);
// The largest weight magnitude of those: 127 or 63 (engine/quant/int8_scheme.h).
int cpuInt8WeightQmax(const CpuInt8Traits& cpu);
// Whether the cpu backend runs a package whose calibration validated `weight_bits`-bit weights
// (model.json quantization.weight_bits): the runtime uses exactly those bits, so 7-bit packages
// run on every CPU with identical results, 8-bit ones where VNNI or AMX is (elsewhere
// kUnsupported saying why and what to do: recalibrate with 7-bit weights, or another
// precision). A pure function, so every answer is tested on any machine.
Status cpuInt8Support(const CpuInt8Traits& cpu, int weight_bits);

}  // namespace voxseg::engine
