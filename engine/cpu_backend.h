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
// on CPUs with AMX, else fp32 (cpuAutoPrecision).
//
// Threads: oneDNN's OpenMP runtime; CompileOptions::num_threads (0 = all cores) is applied with
// omp_set_num_threads on the thread that compiles and on the thread that runs.
// Thread safety: as backend.h (the Backend may be shared; a CompiledGraph is single-threaded).
#pragma once

#include "engine/backend.h"

#include <memory>

namespace voxseg::engine {

std::unique_ptr<Backend> makeCpuBackend();

// The cpu backend's "auto" precision (Backend::autoPrecision) for a CPU with or without AMX
// (amx_bf16, as oneDNN detects it) and avx512_bf16: bf16 with AMX only, as bf16 on AVX512-BF16
// alone measured slower than fp32 (docs/perf-cpu.md). A pure function, so both branches are
// tested on any machine.
PrecisionChoice cpuAutoPrecision(bool amx_bf16, bool avx512_bf16);

}  // namespace voxseg::engine
