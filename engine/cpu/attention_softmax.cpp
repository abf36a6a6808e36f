// The attention's softmax: the portable loops (cpu_attention_softmax_impl.h) built here for the
// x86-64 baseline and in cpu_attention_softmax_avx2.cpp for AVX2, the AVX-512 intrinsics in
// cpu_attention_softmax_avx512.cpp; the dispatcher picks one per call (kernelIsa(), cached).
#define VOXSEG_SOFTMAX_ISA generic
#include "engine/cpu/attention_softmax_impl.h"
#undef VOXSEG_SOFTMAX_ISA

#include "engine/cpu/norm_kernels.h"

namespace voxseg::engine::cpu {

const char* softmaxIsa() { return kernelIsaName(kernelIsa()); }

void softmaxRows(const float* s, int64_t rows, int64_t n, void* p, bool bf16, float* inv_sum) {
#ifdef VOXSEG_HAVE_AVX512_KERNELS
    if (kernelIsa() == KernelIsa::kAvx512) return avx512::softmaxRows(s, rows, n, p, bf16, inv_sum);
    if (kernelIsa() == KernelIsa::kAvx2) return avx2::softmaxRows(s, rows, n, p, bf16, inv_sum);
#endif
    generic::softmaxRows(s, rows, n, p, bf16, inv_sum);
}

void softmaxColumns(const float* s, int64_t n, int64_t cols, int64_t ld, void* p, bool bf16,
                    float* inv_sum) {
#ifdef VOXSEG_HAVE_AVX512_KERNELS
    if (kernelIsa() == KernelIsa::kAvx512)
        return avx512::softmaxColumns(s, n, cols, ld, p, bf16, inv_sum);
    if (kernelIsa() == KernelIsa::kAvx2)
        return avx2::softmaxColumns(s, n, cols, ld, p, bf16, inv_sum);
#endif
    generic::softmaxColumns(s, n, cols, ld, p, bf16, inv_sum);
}

}  // namespace voxseg::engine::cpu
