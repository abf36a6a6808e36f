#include "engine/cpu/norm_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace voxseg::engine::cpu {

std::optional<LaneLayout> laneLayout(const dnnl::memory::desc& md) {
    const dnnl_memory_desc_t& d = md.data;
    if (d.format_kind != dnnl_blocked || d.ndims < 3 || d.offset0 != 0) return std::nullopt;
    const auto& blk = d.format_desc.blocking;
    const int nd = d.ndims;
    LaneLayout L;
    L.batch = d.dims[0];
    L.channels = d.dims[1];
    L.spatial = 1;
    for (int i = 2; i < nd; ++i) L.spatial *= d.dims[i];
    for (int i = 0; i < nd; ++i)
        if (d.padded_offsets[i] != 0) return std::nullopt;
    for (int i = 2; i < nd; ++i)
        if (d.padded_dims[i] != d.dims[i]) return std::nullopt;
    // Spatial axes must be one dense run with stride E (the innermost element step).
    const int64_t e = blk.strides[nd - 1];
    int64_t expect = e;
    for (int i = nd - 1; i >= 2; --i) {
        if (d.dims[i] > 1 && blk.strides[i] != expect) return std::nullopt;
        expect *= d.dims[i];
    }
    L.n_stride = blk.strides[0];
    if (blk.inner_nblks == 0) {
        if (e == 1) {  // plain: channel planes
            L.lanes = 1;
            L.groups = L.channels;
            L.group_stride = blk.strides[1];
            L.spatial_stride = 1;
        } else if (blk.strides[1] == 1 && e >= L.channels) {  // channels-last
            L.lanes = L.channels;
            L.groups = 1;
            L.group_stride = 0;
            L.spatial_stride = e;
        } else {
            return std::nullopt;
        }
        return L;
    }
    if (blk.inner_nblks == 1 && blk.inner_idxs[0] == 1 && e == blk.inner_blks[0]) {
        L.lanes = blk.inner_blks[0];
        L.groups = d.padded_dims[1] / L.lanes;
        L.group_stride = blk.strides[1];
        L.spatial_stride = L.lanes;
        return L;
    }
    return std::nullopt;
}

}  // namespace voxseg::engine::cpu

// The same loops three times: generic x86-64 here, AVX2 and AVX-512 in
// cpu_norm_kernels_avx2.cpp and cpu_norm_kernels_avx512.cpp.
#define VOXSEG_NORM_ISA generic
#include "engine/cpu/norm_kernels_impl.h"
#undef VOXSEG_NORM_ISA

namespace voxseg::engine::cpu {

#ifdef VOXSEG_HAVE_AVX512_KERNELS
#define VOXSEG_DECLARE_NORM_KERNELS(isa)                                                          \
    namespace isa {                                                                               \
    void moments(const void* x, bool bf16, const LaneLayout& L, int64_t P, int64_t chunks,        \
                 float* cmean, float* cm2);                                                       \
    void apply(const void* x, void* y, const void* r, bool bf16, const LaneLayout& L, int64_t P,  \
               const float* scale, const float* shift, ActivationKind act, float alpha,           \
               const float* slope, const float* mask);                                            \
    void applyU8(const void* x, void* y, uint8_t* q, const void* r, bool bf16,                    \
                 const LaneLayout& L, int64_t P, const float* scale, const float* shift,          \
                 ActivationKind act, float alpha, const float* slope, float inv, float zp,        \
                 float* buf, U8Target second);                                                    \
    void applyFromS8(const int8_t* x, void* y, const void* r, bool y_bf16, const LaneLayout& L,   \
                     int64_t P, const float* scale, const float* shift, ActivationKind act,       \
                     float alpha, const float* slope, const float* mask);                         \
    void momentsS8(const int8_t* x, const LaneLayout& L, int64_t P, int64_t chunks, float* cmean, \
                   float* cm2);                                                                   \
    void applyU8FromS8(const int8_t* x, void* y, uint8_t* q, const void* r, bool y_bf16,          \
                       const LaneLayout& L, int64_t P, const float* scale, const float* shift,    \
                       ActivationKind act, float alpha, const float* slope, float inv, float zp,  \
                       float* buf, U8Target second);                                              \
    void channelNorm(const void* x, void* y, bool bf16, const LaneLayout& L, int64_t P,           \
                     const float* gamma, const float* beta, const float* mask, float eps,         \
                     float* scratch);                                                             \
    void rowLayerNorm(const float* x, void* y, bool y_bf16, int64_t rows, int64_t cols,           \
                      const float* gamma, const float* beta, float eps);                          \
    }
VOXSEG_DECLARE_NORM_KERNELS(avx2)
VOXSEG_DECLARE_NORM_KERNELS(avx512)
#undef VOXSEG_DECLARE_NORM_KERNELS
// One kernel call on the build kernelIsa() picks.
#define VOXSEG_NORM_DISPATCH(call) \
    switch (kernelIsa()) {         \
        case KernelIsa::kAvx512:   \
            return avx512::call;   \
        case KernelIsa::kAvx2:     \
            return avx2::call;     \
        case KernelIsa::kGeneric:  \
            break;                 \
    }                              \
    return generic::call
#else
#define VOXSEG_NORM_DISPATCH(call) return generic::call
#endif

KernelIsa kernelIsa() {
#ifdef VOXSEG_HAVE_AVX512_KERNELS
    static const KernelIsa isa = [] {
        const auto onednn = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
        auto allows = [onednn](dnnl_cpu_isa_t want) {
            return (onednn & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
        };
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            allows(dnnl_cpu_isa_avx512_core))
            return KernelIsa::kAvx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            allows(dnnl_cpu_isa_avx2))
            return KernelIsa::kAvx2;
        return KernelIsa::kGeneric;
    }();
    return isa;
#else
    return KernelIsa::kGeneric;
#endif
}

const char* kernelIsaName(KernelIsa isa) {
    return isa == KernelIsa::kAvx512 ? "avx512" : isa == KernelIsa::kAvx2 ? "avx2" : "generic";
}

namespace {

// Positions per chunk: a chunk (<= 32 KiB of f32) stays in cache for its second pass.
int64_t chunkPositions(int64_t lanes) { return std::max<int64_t>(64, 8192 / lanes); }

}  // namespace

const char* normKernelIsa() { return kernelIsaName(kernelIsa()); }

namespace {

// Merges the per-chunk moments of every channel (Chan's formula, in double). The chunks run in
// the outer loop and the lanes in the inner one: each lane's arithmetic is the same sequence as
// a loop over one channel's chunks, but the lanes' dependency chains (a division each) overlap
// instead of running one after another (8,192 chunks x 32 lanes at 128^3 took ~2 ms serial).
void mergeChunkMoments(const LaneLayout& L, int64_t P, int64_t chunks,
                       const std::vector<float>& cmean, const std::vector<float>& cm2,
                       std::vector<double>& mean, std::vector<double>& m2) {
    const int64_t lanes = L.lanes;
    mean.assign(L.batch * L.channels, 0.0);
    m2.assign(L.batch * L.channels, 0.0);
    std::vector<double> mu(lanes), sq(lanes);
    for (int64_t n = 0; n < L.batch; ++n) {
        for (int64_t g = 0; g < L.groups; ++g) {
            const int64_t real = std::min(lanes, L.channels - g * lanes);
            std::fill(mu.begin(), mu.end(), 0.0);
            std::fill(sq.begin(), sq.end(), 0.0);
            double cnt = 0;
            for (int64_t k = 0; k < chunks; ++k) {
                const int64_t u = (n * L.groups + g) * chunks + k;
                const double nb = static_cast<double>(std::min(P, L.spatial - k * P));
                const double total = cnt + nb;
                const float* cmu = &cmean[u * lanes];
                const float* csq = &cm2[u * lanes];
                for (int64_t l = 0; l < real; ++l) {
                    const double delta = cmu[l] - mu[l];
                    mu[l] += delta * nb / total;
                    sq[l] += csq[l] + delta * delta * cnt * nb / total;
                }
                cnt = total;
            }
            for (int64_t l = 0; l < real; ++l) {
                mean[n * L.channels + g * lanes + l] = mu[l];
                m2[n * L.channels + g * lanes + l] = sq[l];
            }
        }
    }
}

}  // namespace

void channelMoments(const void* x, bool bf16, const LaneLayout& L, std::vector<double>& mean,
                    std::vector<double>& m2) {
    const int64_t P = chunkPositions(L.lanes);
    const int64_t chunks = (L.spatial + P - 1) / P;
    std::vector<float> cmean(L.batch * L.groups * chunks * L.lanes), cm2(cmean.size());
    [&] { VOXSEG_NORM_DISPATCH(moments(x, bf16, L, P, chunks, cmean.data(), cm2.data())); }();
    mergeChunkMoments(L, P, chunks, cmean, cm2, mean, m2);
}

void channelMomentsS8(const int8_t* x, const LaneLayout& L, std::vector<double>& mean,
                      std::vector<double>& m2) {
    const int64_t P = chunkPositions(L.lanes);
    const int64_t chunks = (L.spatial + P - 1) / P;
    std::vector<float> cmean(L.batch * L.groups * chunks * L.lanes), cm2(cmean.size());
    [&] { VOXSEG_NORM_DISPATCH(momentsS8(x, L, P, chunks, cmean.data(), cm2.data())); }();
    mergeChunkMoments(L, P, chunks, cmean, cm2, mean, m2);
}

namespace {

// Per padded channel: 1 for a real channel and 0 for padding, and the PReLU slope (0 without).
void maskAndSlope(const LaneLayout& L, const float* slope_in, std::vector<float>& mask,
                  std::vector<float>& slope) {
    const int64_t cp = L.paddedChannels();
    mask.assign(cp, 0.0f);
    slope.assign(cp, 0.0f);
    for (int64_t c = 0; c < cp; ++c) {
        mask[c] = c < L.channels ? 1.0f : 0.0f;
        if (slope_in) slope[c] = slope_in[c];
    }
}

}  // namespace

void affineActivation(const void* x, void* y, const void* residual, bool bf16, const LaneLayout& L,
                      const float* scale, const float* shift, ActivationKind act, float alpha,
                      const float* slope_in) {
    std::vector<float> mask, slope;
    maskAndSlope(L, slope_in, mask, slope);
    const int64_t P = chunkPositions(L.lanes);
    VOXSEG_NORM_DISPATCH(
        apply(x, y, residual, bf16, L, P, scale, shift, act, alpha, slope.data(), mask.data()));
}

void affineActivationU8(const void* x, void* y, uint8_t* q, const void* residual, bool bf16,
                        const LaneLayout& L, const float* scale, const float* shift,
                        ActivationKind act, float alpha, const float* slope_in, float inv_scale,
                        float zero_point, U8Target second) {
    std::vector<float> mask, slope;
    maskAndSlope(L, slope_in, mask, slope);
    const int64_t P = chunkPositions(L.lanes);
    std::vector<float> buf(static_cast<size_t>(P * L.lanes * omp_get_max_threads()));
    VOXSEG_NORM_DISPATCH(applyU8(x, y, q, residual, bf16, L, P, scale, shift, act, alpha,
                                 slope.data(), inv_scale, zero_point, buf.data(), second));
}

void affineActivationFromS8(const int8_t* x, void* y, const void* residual, bool y_bf16,
                            const LaneLayout& L, const float* scale, const float* shift,
                            ActivationKind act, float alpha, const float* slope_in) {
    std::vector<float> mask, slope;
    maskAndSlope(L, slope_in, mask, slope);
    const int64_t P = chunkPositions(L.lanes);
    VOXSEG_NORM_DISPATCH(applyFromS8(x, y, residual, y_bf16, L, P, scale, shift, act, alpha,
                                     slope.data(), mask.data()));
}

void affineActivationU8FromS8(const int8_t* x, void* y, uint8_t* q, const void* residual,
                              bool y_bf16, const LaneLayout& L, const float* scale,
                              const float* shift, ActivationKind act, float alpha,
                              const float* slope_in, float inv_scale, float zero_point,
                              U8Target second) {
    std::vector<float> mask, slope;
    maskAndSlope(L, slope_in, mask, slope);
    const int64_t P = chunkPositions(L.lanes);
    std::vector<float> buf(static_cast<size_t>(P * L.lanes * omp_get_max_threads()));
    VOXSEG_NORM_DISPATCH(applyU8FromS8(x, y, q, residual, y_bf16, L, P, scale, shift, act, alpha,
                                       slope.data(), inv_scale, zero_point, buf.data(), second));
}

void channelLayerNorm(const void* x, void* y, bool bf16, const LaneLayout& L, const float* gamma,
                      const float* beta, float eps) {
    const int64_t cp = L.paddedChannels();
    std::vector<float> mask(cp, 0.0f), g(cp, 0.0f), b(cp, 0.0f);
    for (int64_t c = 0; c < L.channels; ++c) {
        mask[c] = 1.0f;
        g[c] = gamma[c];
        b[c] = beta ? beta[c] : 0.0f;
    }
    // Positions per chunk: the chunk's values (<= 256 KiB of f32) stay in cache for the second
    // and third pass; a multiple of 16 positions.
    const int64_t P = std::max<int64_t>(16, (65536 / cp) / 16 * 16);
    std::vector<float> scratch(static_cast<size_t>(P * (L.lanes + 2) * omp_get_max_threads()));
    VOXSEG_NORM_DISPATCH(
        channelNorm(x, y, bf16, L, P, g.data(), b.data(), mask.data(), eps, scratch.data()));
}

void rowLayerNorm(const float* x, void* y, bool y_bf16, int64_t rows, int64_t cols,
                  const float* gamma, const float* beta, float eps) {
    VOXSEG_NORM_DISPATCH(rowLayerNorm(x, y, y_bf16, rows, cols, gamma, beta, eps));
}

}  // namespace voxseg::engine::cpu
