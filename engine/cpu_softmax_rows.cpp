// The softmax rows twice: generic x86-64 here, AVX-512 in cpu_softmax_rows_avx512.cpp; the
// dispatcher picks one per call (a cached CPU check).
#define VOXSEG_SOFTMAX_ISA generic
#include "engine/cpu_softmax_rows_impl.h"
#undef VOXSEG_SOFTMAX_ISA

#include "engine/cpu_norm_kernels.h"

namespace voxseg::engine::cpu {

const char* softmaxRowsIsa() { return avx512KernelsUsable() ? "avx512" : "generic"; }

void softmaxRows(const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv_sum) {
#ifdef VOXSEG_HAVE_AVX512_KERNELS
    if (avx512KernelsUsable()) return avx512::softmaxRows(s, rows, n, p, bf16, inv_sum);
#endif
    generic::softmaxRows(s, rows, n, p, bf16, inv_sum);
}

void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum) {
#ifdef VOXSEG_HAVE_AVX512_KERNELS
    if (avx512KernelsUsable()) return avx512::softmaxColumns(s, n, cols, ld, p, bf16, inv_sum);
#endif
    generic::softmaxColumns(s, n, cols, ld, p, bf16, inv_sum);
}

}  // namespace voxseg::engine::cpu
