#include "engine/cpu_norm_kernels.h"

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

namespace {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) {
    uint32_t u = static_cast<uint32_t>(p[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (inputs are finite here)
    p[i] = static_cast<uint16_t>(u >> 16);
}

// Positions per chunk: a chunk (<= 32 KiB of f32) stays in cache for its second pass.
int64_t chunkPositions(int64_t lanes) { return std::max<int64_t>(64, 8192 / lanes); }

// Per-chunk mean and M2 for each lane; LANES > 0 is a compile-time lane count.
template <int LANES, typename T>
void chunkMoments(const T* base, int64_t lanes_rt, int64_t stride, int64_t count, float* mean,
                  float* m2) {
    const int64_t lanes = LANES > 0 ? LANES : lanes_rt;
    if (lanes == 1) {
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t s = 0; s < count; ++s) sum += load(base, s);
        const float mu = sum / static_cast<float>(count);
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int64_t s = 0; s < count; ++s) {
            const float dlt = load(base, s) - mu;
            acc += dlt * dlt;
        }
        mean[0] = mu;
        m2[0] = acc;
        return;
    }
    for (int64_t l = 0; l < lanes; ++l) mean[l] = 0.0f, m2[l] = 0.0f;
    for (int64_t s = 0; s < count; ++s) {
        const T* p = base + s * stride;
#pragma omp simd
        for (int64_t l = 0; l < lanes; ++l) mean[l] += load(p, l);
    }
    const float inv = 1.0f / static_cast<float>(count);
    for (int64_t l = 0; l < lanes; ++l) mean[l] *= inv;
    for (int64_t s = 0; s < count; ++s) {
        const T* p = base + s * stride;
#pragma omp simd
        for (int64_t l = 0; l < lanes; ++l) {
            const float dlt = load(p, l) - mean[l];
            m2[l] += dlt * dlt;
        }
    }
}

template <typename T>
void momentsImpl(const T* x, const LaneLayout& L, std::vector<double>& mean,
                 std::vector<double>& m2) {
    const int64_t P = chunkPositions(L.lanes);
    const int64_t chunks = (L.spatial + P - 1) / P;
    const int64_t units = L.batch * L.groups;
    const int64_t lanes = L.lanes;
    std::vector<float> cmean(units * chunks * lanes), cm2(units * chunks * lanes);
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < units * chunks; ++u) {
        const int64_t unit = u / chunks, chunk = u % chunks;
        const int64_t n = unit / L.groups, g = unit % L.groups;
        const int64_t s0 = chunk * P, count = std::min(P, L.spatial - s0);
        const T* base = x + n * L.n_stride + g * L.group_stride + s0 * L.spatial_stride;
        float* mu = &cmean[u * lanes];
        float* sq = &cm2[u * lanes];
        if (lanes == 16)
            chunkMoments<16>(base, lanes, L.spatial_stride, count, mu, sq);
        else
            chunkMoments<0>(base, lanes, L.spatial_stride, count, mu, sq);
    }
    mean.assign(L.batch * L.channels, 0.0);
    m2.assign(L.batch * L.channels, 0.0);
    for (int64_t n = 0; n < L.batch; ++n) {
        for (int64_t c = 0; c < L.channels; ++c) {
            const int64_t g = c / lanes, l = c % lanes;
            double cnt = 0, mu = 0, sq = 0;
            for (int64_t k = 0; k < chunks; ++k) {
                const int64_t u = (n * L.groups + g) * chunks + k;
                const double nb = static_cast<double>(std::min(P, L.spatial - k * P));
                const double mb = cmean[u * lanes + l];
                const double delta = mb - mu;
                const double total = cnt + nb;
                mu += delta * nb / total;
                sq += cm2[u * lanes + l] + delta * delta * cnt * nb / total;
                cnt = total;
            }
            mean[n * L.channels + c] = mu;
            m2[n * L.channels + c] = sq;
        }
    }
}

template <int ACT>
inline float activate(float v, float alpha, float slope) {
    if constexpr (ACT == static_cast<int>(ActivationKind::kRelu)) return v > 0.0f ? v : 0.0f;
    if constexpr (ACT == static_cast<int>(ActivationKind::kLeakyRelu))
        return v > 0.0f ? v : v * alpha;
    if constexpr (ACT == static_cast<int>(ActivationKind::kPRelu)) return v > 0.0f ? v : v * slope;
    if constexpr (ACT == static_cast<int>(ActivationKind::kSigmoid))
        return 1.0f / (1.0f + std::exp(-v));
    return v;
}

template <int LANES, int ACT, typename T>
void applyChunk(const T* x, T* y, const T* r, int64_t lanes_rt, int64_t stride, int64_t count,
                const float* a, const float* b, const float* mask, float alpha,
                const float* slope) {
    const int64_t lanes = LANES > 0 ? LANES : lanes_rt;
    if (lanes == 1) {
        const float a0 = a[0], b0 = b[0], m0 = mask[0], s0 = slope[0];
#pragma omp simd
        for (int64_t s = 0; s < count; ++s) {
            float v = load(x, s) * a0 + b0;
            if (r) v += load(r, s);
            store(y, s, activate<ACT>(v, alpha, s0) * m0);
        }
        return;
    }
    for (int64_t s = 0; s < count; ++s) {
        const int64_t o = s * stride;
#pragma omp simd
        for (int64_t l = 0; l < lanes; ++l) {
            float v = load(x, o + l) * a[l] + b[l];
            if (r) v += load(r, o + l);
            store(y, o + l, activate<ACT>(v, alpha, slope[l]) * mask[l]);
        }
    }
}

template <int ACT, typename T>
void applyImpl(const T* x, T* y, const T* r, const LaneLayout& L, const float* scale,
               const float* shift, float alpha, const float* slope_in) {
    const int64_t P = chunkPositions(L.lanes);
    const int64_t chunks = (L.spatial + P - 1) / P;
    const int64_t units = L.batch * L.groups;
    const int64_t lanes = L.lanes, cp = L.paddedChannels();
    std::vector<float> mask(cp), slope(cp, 0.0f);
    for (int64_t c = 0; c < cp; ++c) {
        mask[c] = c < L.channels ? 1.0f : 0.0f;
        if (slope_in) slope[c] = slope_in[c];
    }
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < units * chunks; ++u) {
        const int64_t unit = u / chunks, chunk = u % chunks;
        const int64_t n = unit / L.groups, g = unit % L.groups;
        const int64_t s0 = chunk * P, count = std::min(P, L.spatial - s0);
        const int64_t off = n * L.n_stride + g * L.group_stride + s0 * L.spatial_stride;
        const float* a = scale + n * cp + g * lanes;
        const float* b = shift + n * cp + g * lanes;
        const T* rr = r ? r + off : nullptr;
        if (lanes == 16)
            applyChunk<16, ACT>(x + off, y + off, rr, lanes, L.spatial_stride, count, a, b,
                                &mask[g * lanes], alpha, &slope[g * lanes]);
        else
            applyChunk<0, ACT>(x + off, y + off, rr, lanes, L.spatial_stride, count, a, b,
                               &mask[g * lanes], alpha, &slope[g * lanes]);
    }
}

template <typename T>
void applyDispatch(const void* x, void* y, const void* r, const LaneLayout& L, const float* scale,
                   const float* shift, ActivationKind act, float alpha, const float* slope) {
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    const T* rt = static_cast<const T*>(r);
    switch (act) {
        case ActivationKind::kNone:
            return applyImpl<static_cast<int>(ActivationKind::kNone)>(xt, yt, rt, L, scale, shift,
                                                                      alpha, slope);
        case ActivationKind::kRelu:
            return applyImpl<static_cast<int>(ActivationKind::kRelu)>(xt, yt, rt, L, scale, shift,
                                                                      alpha, slope);
        case ActivationKind::kLeakyRelu:
            return applyImpl<static_cast<int>(ActivationKind::kLeakyRelu)>(xt, yt, rt, L, scale,
                                                                           shift, alpha, slope);
        case ActivationKind::kPRelu:
            return applyImpl<static_cast<int>(ActivationKind::kPRelu)>(xt, yt, rt, L, scale, shift,
                                                                       alpha, slope);
        case ActivationKind::kSigmoid:
            return applyImpl<static_cast<int>(ActivationKind::kSigmoid)>(xt, yt, rt, L, scale,
                                                                         shift, alpha, slope);
    }
}

}  // namespace

void channelMoments(const void* x, bool bf16, const LaneLayout& layout, std::vector<double>& mean,
                    std::vector<double>& m2) {
    if (bf16)
        momentsImpl(static_cast<const uint16_t*>(x), layout, mean, m2);
    else
        momentsImpl(static_cast<const float*>(x), layout, mean, m2);
}

void affineActivation(const void* x, void* y, const void* residual, bool bf16,
                      const LaneLayout& layout, const float* scale, const float* shift,
                      ActivationKind act, float alpha, const float* slope) {
    if (bf16)
        applyDispatch<uint16_t>(x, y, residual, layout, scale, shift, act, alpha, slope);
    else
        applyDispatch<float>(x, y, residual, layout, scale, shift, act, alpha, slope);
}

}  // namespace voxseg::engine::cpu
