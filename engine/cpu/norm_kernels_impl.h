// Internal to the oneDNN CPU backend: the instance/group-norm loops, compiled twice (generic
// x86-64 and AVX-512, see cpu_norm_kernels*.cpp) into the namespace VOXSEG_NORM_ISA; the
// dispatcher in cpu_norm_kernels.cpp picks one at run time. No std containers here, so the
// AVX-512 translation unit emits no inline library code the generic one could pick up.
// Included only by those two files.
#include "engine/cpu/norm_kernels.h"
#include "engine/quant/int8_scheme.h"

#include <immintrin.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace voxseg::engine::cpu::VOXSEG_NORM_ISA {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) {
    uint32_t u = static_cast<uint32_t>(p[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float load(const int8_t* p, int64_t i) { return static_cast<float>(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (inputs are finite here)
    p[i] = static_cast<uint16_t>(u >> 16);
}

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

// chunkMoments of 8 dense channels-last lanes through 16-lane registers: pairs of positions give
// each lane's moments over the even and the odd positions, merged (Chan's formula, in double)
// with each other and with an odd last position.
template <typename T>
void chunkMomentsPairs(const T* base, int64_t count, float* mean, float* m2) {
    const int64_t pairs = count / 2;
    float mu16[16], m2_16[16];
    if (pairs > 0) chunkMoments<16>(base, 16, 16, pairs, mu16, m2_16);
    for (int l = 0; l < 8; ++l) {
        double n = 0, mu = 0, q = 0;
        if (pairs > 0) {
            const double d = double(mu16[l + 8]) - mu16[l];
            n = 2.0 * double(pairs);
            mu = (double(mu16[l]) + mu16[l + 8]) / 2.0;
            q = double(m2_16[l]) + m2_16[l + 8] + d * d * double(pairs) / 2.0;
        }
        if (count % 2) {
            const double v = load(base, pairs * 16 + l), d = v - mu;
            n += 1.0;
            mu += d / n;
            q += d * (v - mu);
        }
        mean[l] = static_cast<float>(mu);
        m2[l] = static_cast<float>(q);
    }
}

// f(u, offset, count) for every (unit, chunk) u of P positions (a unit: one batch entry's
// channel group), in parallel; `offset` is the chunk's first element.
template <typename F>
void forEachMomentChunk(const LaneLayout& L, int64_t P, int64_t chunks, F&& f) {
    const int64_t units = L.batch * L.groups;
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < units * chunks; ++u) {
        const int64_t unit = u / chunks, chunk = u % chunks;
        const int64_t n = unit / L.groups, g = unit % L.groups;
        const int64_t s0 = chunk * P;
        const int64_t count = L.spatial - s0 < P ? L.spatial - s0 : P;
        f(u, n * L.n_stride + g * L.group_stride + s0 * L.spatial_stride, count);
    }
}

// Per-(unit, chunk) lane means and M2 into cmean/cm2 ([units * chunks * lanes]).
template <typename T>
void momentsT(const T* x, const LaneLayout& L, int64_t P, int64_t chunks, float* cmean,
              float* cm2) {
    const int64_t lanes = L.lanes;
    forEachMomentChunk(L, P, chunks, [&](int64_t u, int64_t off, int64_t count) {
        const T* base = x + off;
        float* mu = &cmean[u * lanes];
        float* sq = &cm2[u * lanes];
        if (lanes == 16)
            chunkMoments<16>(base, lanes, L.spatial_stride, count, mu, sq);
        else if (lanes == 8 && L.spatial_stride == 8)  // 8 channels-last: pairs as 16 lanes
            chunkMomentsPairs(base, count, mu, sq);
        else if (lanes == 8)  // nCdhw8c, oneDNN's blocking on CPUs without AVX-512
            chunkMoments<8>(base, lanes, L.spatial_stride, count, mu, sq);
        else if (lanes == 32)  // channels-last at nnU-Net's full resolution
            chunkMoments<32>(base, lanes, L.spatial_stride, count, mu, sq);
        else
            chunkMoments<0>(base, lanes, L.spatial_stride, count, mu, sq);
    });
}

template <int ACT>
inline float activate(float v, float alpha, float slope) {
    if constexpr (ACT == static_cast<int>(ActivationKind::kRelu)) return v > 0.0f ? v : 0.0f;
    if constexpr (ACT == static_cast<int>(ActivationKind::kLeakyRelu))
        return v > 0.0f ? v : v * alpha;
    if constexpr (ACT == static_cast<int>(ActivationKind::kPRelu)) return v > 0.0f ? v : v * slope;
    if constexpr (ACT == static_cast<int>(ActivationKind::kSigmoid))
        return 1.0f / (1.0f + std::exp(-v));
    if constexpr (ACT == static_cast<int>(ActivationKind::kSilu)) return v / (1.0f + std::exp(-v));
    return v;
}

template <int LANES, int ACT, typename TX, typename T>
void applyChunk(const TX* x, T* y, const T* r, int64_t lanes_rt, int64_t stride, int64_t count,
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

// applyChunk on 8 dense channels-last lanes as 16: pairs of positions, the per-lane parameters
// twice (a 16-lane register per pair instead of half of one), an odd last position with 8.
template <int ACT, typename TX, typename T>
void applyChunkPairs(const TX* x, T* y, const T* r, int64_t count, const float* a, const float* b,
                     const float* mask, float alpha, const float* slope) {
    float a16[16], b16[16], m16[16], s16[16];
    for (int l = 0; l < 16; ++l)
        a16[l] = a[l % 8], b16[l] = b[l % 8], m16[l] = mask[l % 8], s16[l] = slope[l % 8];
    const int64_t pairs = count / 2, done = pairs * 16;
    applyChunk<16, ACT>(x, y, r, 16, 16, pairs, a16, b16, m16, alpha, s16);
    if (count % 2)
        applyChunk<8, ACT>(x + done, y + done, r ? r + done : nullptr, 8, 8, 1, a, b, mask, alpha,
                           slope);
}

// f(std::integral_constant<int, ACT>) with `act` as a compile-time constant.
template <typename F>
void withActivation(ActivationKind act, F&& f) {
    using K = ActivationKind;
    switch (act) {
        case K::kNone:
            return f(std::integral_constant<int, static_cast<int>(K::kNone)>{});
        case K::kRelu:
            return f(std::integral_constant<int, static_cast<int>(K::kRelu)>{});
        case K::kLeakyRelu:
            return f(std::integral_constant<int, static_cast<int>(K::kLeakyRelu)>{});
        case K::kPRelu:
            return f(std::integral_constant<int, static_cast<int>(K::kPRelu)>{});
        case K::kSigmoid:
            return f(std::integral_constant<int, static_cast<int>(K::kSigmoid)>{});
        case K::kSilu:
            return f(std::integral_constant<int, static_cast<int>(K::kSilu)>{});
    }
}

// chunk(n, g, offset, count) for every chunk of P positions of every (batch, channel group), in
// parallel; `offset` is the chunk's first element. A chunk is cut where `target` (a u8 with a
// halo) is no longer contiguous: at the end of each row.
template <typename F>
void forEachChunk(const LaneLayout& L, int64_t P, F&& chunk, const U8Target& target = {}) {
    const int64_t chunks = (L.spatial + P - 1) / P;
    const int64_t units = L.batch * L.groups;
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < units * chunks; ++u) {
        const int64_t unit = u / chunks, c = u % chunks;
        const int64_t n = unit / L.groups, g = unit % L.groups;
        const int64_t s0 = c * P;
        const int64_t positions = L.spatial - s0 < P ? L.spatial - s0 : P;
        const int64_t first = n * L.n_stride + g * L.group_stride + s0 * L.spatial_stride;
        for (int64_t done = 0; done < positions;) {
            const int64_t off = first + done * L.spatial_stride;
            const int64_t count = target.run(off, L.lanes, positions - done);
            chunk(n, g, off, count);
            done += count;
        }
    }
}

// TX: the source (f32, bf16, or s8 for 8-bit normalisation inputs), T: y and the residual.
template <typename TX, typename T>
void applyT(const void* x, void* y, const void* r, const LaneLayout& L, int64_t P,
            const float* scale, const float* shift, ActivationKind act, float alpha,
            const float* slope, const float* mask) {
    const TX* xt = static_cast<const TX*>(x);
    T* yt = static_cast<T*>(y);
    const T* rt = static_cast<const T*>(r);
    const int64_t lanes = L.lanes, cp = L.paddedChannels();
    withActivation(act, [&](auto a) {
        constexpr int ACT = decltype(a)::value;
        forEachChunk(L, P, [&](int64_t n, int64_t g, int64_t off, int64_t count) {
            const float* sa = scale + n * cp + g * lanes;
            const float* sb = shift + n * cp + g * lanes;
            const T* rr = rt ? rt + off : nullptr;
            if (lanes == 16)
                applyChunk<16, ACT>(xt + off, yt + off, rr, lanes, L.spatial_stride, count, sa, sb,
                                    &mask[g * lanes], alpha, &slope[g * lanes]);
            else if (lanes == 8 && L.spatial_stride == 8)  // 8 channels-last: pairs as 16
                applyChunkPairs<ACT>(xt + off, yt + off, rr, count, sa, sb, &mask[g * lanes], alpha,
                                     &slope[g * lanes]);
            else if (lanes == 8)
                applyChunk<8, ACT>(xt + off, yt + off, rr, lanes, L.spatial_stride, count, sa, sb,
                                   &mask[g * lanes], alpha, &slope[g * lanes]);
            else if (lanes == 32)
                applyChunk<32, ACT>(xt + off, yt + off, rr, lanes, L.spatial_stride, count, sa, sb,
                                    &mask[g * lanes], alpha, &slope[g * lanes]);
            else
                applyChunk<0, ACT>(xt + off, yt + off, rr, lanes, L.spatial_stride, count, sa, sb,
                                   &mask[g * lanes], alpha, &slope[g * lanes]);
        });
    });
}

// q[i] = rne(clamp(f[i] * inv + zp, 0, 255)) for n values, as oneDNN's quantising reorder and
// quant::quantizeActivation. With AVX2 or AVX-512 in intrinsics: the compilers
// turn the clamp into mask arithmetic (2.2x the time of the FMA pass it follows, measured with
// GCC 12); max/min, the rounding conversion (MXCSR's default: nearest even) and saturating packs
// do the same exactly.
inline void quantizeRow(const float* f, uint8_t* q, int64_t n, float inv, float zp) {
    int64_t i = 0;
#if defined(__AVX512F__)
    const __m512 vi = _mm512_set1_ps(inv), vz = _mm512_set1_ps(zp);
    const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(f + i), vi, vz);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                         _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(v)));
    }
#elif defined(__AVX2__)
    const __m256 vi = _mm256_set1_ps(inv), vz = _mm256_set1_ps(zp);
    const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(f + i), vi, vz);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        const __m256i w = _mm256_cvtps_epi32(v);
        const __m128i h =
            _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packus_epi16(h, h));
    }
#endif
    for (; i < n; ++i) q[i] = quant::roundToU8(f[i] * inv + zp);
}

// applyChunk writing the u8 quantisation of each result into `q` (same element offsets) and,
// when KEEP, the result into `y` too. Layouts without padding channels (no mask) whose positions
// are dense (stride == lanes, as every layout laneLayout() walks). Two loops over the chunk, the
// float results through `buf` (count * lanes floats, in cache): quantising in the first would
// size its vectors by the u8 stores (64 lanes), longer than a position's 16 or 32 channels, and
// leave it all to the scalar remainder; the second runs over the whole chunk at once.
template <int LANES, int ACT, bool KEEP, typename TX, typename T>
void applyChunkU8(const TX* x, T* y, uint8_t* q, const T* r, int64_t lanes_rt, int64_t count,
                  const float* a, const float* b, float alpha, const float* slope, float inv,
                  float zp, float* buf, const U8Target& second, int64_t off) {
    const int64_t lanes = LANES > 0 ? LANES : lanes_rt;
    for (int64_t s = 0; s < count; ++s) {
        const int64_t o = s * lanes;
#pragma omp simd
        for (int64_t l = 0; l < lanes; ++l) {
            float v = load(x, o + l) * a[l] + b[l];
            if (r) v += load(r, o + l);
            v = activate<ACT>(v, alpha, slope[l]);
            if constexpr (KEEP) store(y, o + l, v);
            buf[o + l] = v;
        }
    }
    if (q) quantizeRow(buf, q, count * lanes, inv, zp);
    if (!second.q) return;
    uint8_t* q2 = second.at(off, lanes);
    if (second.stride == 0)
        quantizeRow(buf, q2, count * lanes, second.inv_scale, second.zero_point);
    else
        for (int64_t s = 0; s < count; ++s)
            quantizeRow(buf + s * lanes, q2 + s * second.stride, lanes, second.inv_scale,
                        second.zero_point);
}

// TX: the source (f32, bf16, or s8 for 8-bit normalisation inputs), T: y and the residual.
template <typename TX, typename T>
void applyU8T(const void* x, void* y, uint8_t* q, const void* r, const LaneLayout& L, int64_t P,
              const float* scale, const float* shift, ActivationKind act, float alpha,
              const float* slope, float inv, float zp, float* buf, const U8Target& second) {
    const TX* xt = static_cast<const TX*>(x);
    T* yt = static_cast<T*>(y);
    const T* rt = static_cast<const T*>(r);
    const int64_t lanes = L.lanes, cp = L.paddedChannels();
    auto run = [&](auto a, auto keep) {
        constexpr int ACT = decltype(a)::value;
        constexpr bool KEEP = decltype(keep)::value;
        forEachChunk(
            L, P,
            [&](int64_t n, int64_t g, int64_t off, int64_t count) {
                const float* sa = scale + n * cp + g * lanes;
                const float* sb = shift + n * cp + g * lanes;
                const T* rr = rt ? rt + off : nullptr;
                T* yy = KEEP ? yt + off : nullptr;
                uint8_t* qq = q ? q + off : nullptr;
                float* tb = buf + omp_get_thread_num() * P * lanes;  // this thread's chunk buffer
                if (lanes == 16)
                    applyChunkU8<16, ACT, KEEP>(xt + off, yy, qq, rr, lanes, count, sa, sb, alpha,
                                                &slope[g * lanes], inv, zp, tb, second, off);
                else if (lanes == 32)
                    applyChunkU8<32, ACT, KEEP>(xt + off, yy, qq, rr, lanes, count, sa, sb, alpha,
                                                &slope[g * lanes], inv, zp, tb, second, off);
                else if (lanes == 8)  // 8 channels-last channels: the runtime loop stayed scalar
                    applyChunkU8<8, ACT, KEEP>(xt + off, yy, qq, rr, lanes, count, sa, sb, alpha,
                                               &slope[g * lanes], inv, zp, tb, second, off);
                else
                    applyChunkU8<0, ACT, KEEP>(xt + off, yy, qq, rr, lanes, count, sa, sb, alpha,
                                               &slope[g * lanes], inv, zp, tb, second, off);
            },
            second);
    };
    withActivation(act, [&](auto a) {
        if (yt)
            run(a, std::true_type{});
        else
            run(a, std::false_type{});
    });
}

// Channel LayerNorm of the positions [0, count) of one chunk (x and y point at its first
// position): per position the mean and variance over all channels (two passes over the chunk,
// which stays in cache), then y = (x - mean) * rstd * gamma + beta. `acc` holds count * lanes
// floats, `mean` and `rstd` count floats. Padding channels (mask 0) are left out of the moments
// and written as zero (gamma and beta are zero there).
template <int LANES, typename T>
void channelNormChunk(const T* x, T* y, const LaneLayout& L, int64_t count, const float* gamma,
                      const float* beta, const float* mask, float eps, float* acc, float* mean,
                      float* rstd) {
    const int64_t lanes = LANES > 0 ? LANES : L.lanes;
    const int64_t ss = L.spatial_stride, gs = L.group_stride;
    const float inv_c = 1.0f / static_cast<float>(L.channels);
    for (int pass = 0; pass < 2; ++pass) {
        for (int64_t i = 0; i < count * lanes; ++i) acc[i] = 0.0f;
        for (int64_t g = 0; g < L.groups; ++g) {
            const T* p = x + g * gs;
            const float* m = mask + g * lanes;
            if (lanes == 1) {
                const float m0 = m[0];
                if (pass == 0) {
#pragma omp simd
                    for (int64_t s = 0; s < count; ++s) acc[s] += load(p, s) * m0;
                } else {
#pragma omp simd
                    for (int64_t s = 0; s < count; ++s) {
                        const float d = (load(p, s) - mean[s]) * m0;
                        acc[s] += d * d;
                    }
                }
                continue;
            }
            for (int64_t s = 0; s < count; ++s) {
                float* a = acc + s * lanes;
                const T* ps = p + s * ss;
                if (pass == 0) {
#pragma omp simd
                    for (int64_t l = 0; l < lanes; ++l) a[l] += load(ps, l) * m[l];
                } else {
                    const float mu = mean[s];
#pragma omp simd
                    for (int64_t l = 0; l < lanes; ++l) {
                        const float d = (load(ps, l) - mu) * m[l];
                        a[l] += d * d;
                    }
                }
            }
        }
        for (int64_t s = 0; s < count; ++s) {
            float t = 0.0f;
            const float* a = acc + s * lanes;
#pragma omp simd reduction(+ : t)
            for (int64_t l = 0; l < lanes; ++l) t += a[l];
            if (pass == 0)
                mean[s] = t * inv_c;
            else
                rstd[s] = 1.0f / std::sqrt(t * inv_c + eps);
        }
    }
    for (int64_t g = 0; g < L.groups; ++g) {
        const T* p = x + g * gs;
        T* q = y + g * gs;
        const float* ga = gamma + g * lanes;
        const float* be = beta + g * lanes;
        if (lanes == 1) {
            const float g0 = ga[0], b0 = be[0];
#pragma omp simd
            for (int64_t s = 0; s < count; ++s)
                store(q, s, (load(p, s) - mean[s]) * rstd[s] * g0 + b0);
            continue;
        }
        for (int64_t s = 0; s < count; ++s) {
            const float mu = mean[s], rs = rstd[s];
            const T* ps = p + s * ss;
            T* qs = q + s * ss;
#pragma omp simd
            for (int64_t l = 0; l < lanes; ++l)
                store(qs, l, (load(ps, l) - mu) * rs * ga[l] + be[l]);
        }
    }
}

template <typename T>
void channelNormT(const T* x, T* y, const LaneLayout& L, int64_t P, const float* gamma,
                  const float* beta, const float* mask, float eps, float* scratch) {
    const int64_t chunks = (L.spatial + P - 1) / P;
    const int64_t per_thread = P * (L.lanes + 2);
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < L.batch * chunks; ++u) {
        const int64_t n = u / chunks, s0 = (u % chunks) * P;
        const int64_t count = L.spatial - s0 < P ? L.spatial - s0 : P;
        float* acc = scratch + omp_get_thread_num() * per_thread;
        const int64_t off = n * L.n_stride + s0 * L.spatial_stride;
        if (L.lanes == 16)
            channelNormChunk<16>(x + off, y + off, L, count, gamma, beta, mask, eps, acc,
                                 acc + P * 16, acc + P * 17);
        else if (L.lanes == 8)
            channelNormChunk<8>(x + off, y + off, L, count, gamma, beta, mask, eps, acc,
                                acc + P * 8, acc + P * 9);
        else
            channelNormChunk<0>(x + off, y + off, L, count, gamma, beta, mask, eps, acc,
                                acc + P * L.lanes, acc + P * (L.lanes + 1));
    }
}

void channelNorm(const void* x, void* y, bool bf16, const LaneLayout& L, int64_t P,
                 const float* gamma, const float* beta, const float* mask, float eps,
                 float* scratch) {
    if (bf16)
        channelNormT(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), L, P, gamma, beta,
                     mask, eps, scratch);
    else
        channelNormT(static_cast<const float*>(x), static_cast<float*>(y), L, P, gamma, beta, mask,
                     eps, scratch);
}

// LayerNorm over rows of `cols` f32 values, y f32 or bf16 (rowLayerNorm): each row's mean and
// variance in two passes over it (in L1), then one pass that writes y.
template <typename TY>
void rowLayerNormT(const float* x, TY* y, int64_t rows, int64_t cols, const float* gamma,
                   const float* beta, float eps) {
    const float inv_c = 1.0f / static_cast<float>(cols);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        TY* yr = y + r * cols;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < cols; ++c) sum += xr[c];
        const float mean = sum * inv_c;
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t c = 0; c < cols; ++c) {
            const float d = xr[c] - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / std::sqrt(sq * inv_c + eps);
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) store(yr, c, (xr[c] - mean) * rstd * gamma[c] + beta[c]);
    }
}

void rowLayerNorm(const float* x, void* y, bool y_bf16, int64_t rows, int64_t cols,
                  const float* gamma, const float* beta, float eps) {
    if (y_bf16)
        rowLayerNormT(x, static_cast<uint16_t*>(y), rows, cols, gamma, beta, eps);
    else
        rowLayerNormT(x, static_cast<float*>(y), rows, cols, gamma, beta, eps);
}

void moments(const void* x, bool bf16, const LaneLayout& L, int64_t P, int64_t chunks, float* cmean,
             float* cm2) {
    if (bf16)
        momentsT(static_cast<const uint16_t*>(x), L, P, chunks, cmean, cm2);
    else
        momentsT(static_cast<const float*>(x), L, P, chunks, cmean, cm2);
}

void apply(const void* x, void* y, const void* r, bool bf16, const LaneLayout& L, int64_t P,
           const float* scale, const float* shift, ActivationKind act, float alpha,
           const float* slope, const float* mask) {
    if (bf16)
        applyT<uint16_t, uint16_t>(x, y, r, L, P, scale, shift, act, alpha, slope, mask);
    else
        applyT<float, float>(x, y, r, L, P, scale, shift, act, alpha, slope, mask);
}

#if defined(__AVX512F__)
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
inline void store16(uint16_t* p, __m512 v) {  // round to nearest even, as store()
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
}

// The passes from s8 for lanes a multiple of 16 (ReLU, LeakyReLU or none), 16 lanes per
// instruction: y (f32 or bf16) and q each written only when given, the residual added when
// given. The same operations as applyChunk / applyChunkU8 then quantizeRow (the affine map as
// one FMA, as the compiler contracts it there).
template <int ACT, typename T>
void applyChunkS8(const int8_t* x, T* y, uint8_t* q, const T* r, int64_t lanes, int64_t count,
                  const float* a, const float* b, float alpha, float inv, float zp, uint8_t* q2,
                  float inv2, float zp2, int64_t q2_stride) {
    const __m512 vi = _mm512_set1_ps(inv), vz = _mm512_set1_ps(zp), va = _mm512_set1_ps(alpha);
    const __m512 vi2 = _mm512_set1_ps(inv2), vz2 = _mm512_set1_ps(zp2);
    const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
    for (int64_t l0 = 0; l0 < lanes; l0 += 16) {
        const __m512 ma = _mm512_loadu_ps(a + l0), mb = _mm512_loadu_ps(b + l0);
        for (int64_t s = 0; s < count; ++s) {
            const int64_t o = s * lanes + l0;
            const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + o));
            __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(raw)), ma, mb);
            if (r) v = _mm512_add_ps(v, load16(r + o));
            if constexpr (ACT == static_cast<int>(ActivationKind::kRelu)) {
                v = _mm512_max_ps(v, lo);
            } else if constexpr (ACT == static_cast<int>(ActivationKind::kLeakyRelu)) {
                const __mmask16 neg = _mm512_cmp_ps_mask(v, lo, _CMP_NGT_UQ);
                v = _mm512_mask_mul_ps(v, neg, v, va);
            }
            if (y) store16(y + o, v);
            auto quantize = [&](uint8_t* dst, __m512 scale, __m512 point) {
                const __m512 t =
                    _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(v, scale, point), lo), hi);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                                 _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(t)));
            };
            if (q) quantize(q + o, vi, vz);
            if (q2) quantize(q2 + s * q2_stride + l0, vi2, vz2);
        }
    }
}

// 8 dense channels-last lanes as 16 (pairs of positions; the per-lane scale and shift twice), and
// an odd last position through 16-lane copies: the same operations as applyChunkS8 on 16 lanes.
// The second u8 must take pairs of positions contiguously (positionStep 8).
template <int ACT, typename T>
void applyChunkS8Pairs(const int8_t* x, T* y, uint8_t* q, const T* r, int64_t count, const float* a,
                       const float* b, float alpha, float inv, float zp, uint8_t* q2, float inv2,
                       float zp2) {
    float a16[16], b16[16];
    for (int l = 0; l < 16; ++l) a16[l] = a[l % 8], b16[l] = b[l % 8];
    const int64_t pairs = count / 2, done = pairs * 16;
    applyChunkS8<ACT>(x, y, q, r, 16, pairs, a16, b16, alpha, inv, zp, q2, inv2, zp2, 16);
    if (count % 2 == 0) return;
    int8_t xt[16] = {};
    T yt[16] = {}, rt[16] = {};
    uint8_t qt[16], q2t[16];
    for (int l = 0; l < 8; ++l) {
        xt[l] = x[done + l];
        if (r) rt[l] = r[done + l];
    }
    applyChunkS8<ACT>(xt, y ? yt : nullptr, q ? qt : nullptr, r ? rt : nullptr, 16, 1, a16, b16,
                      alpha, inv, zp, q2 ? q2t : nullptr, inv2, zp2, 16);
    for (int l = 0; l < 8; ++l) {
        if (y) y[done + l] = yt[l];
        if (q) q[done + l] = qt[l];
        if (q2) q2[done + l] = q2t[l];
    }
}

// The s8 passes on applyChunkS8 where it applies (dense positions, no padding channels, ReLU /
// LeakyReLU / none; lanes a multiple of 16, or 8 channels-last through applyChunkS8Pairs); false
// where the caller takes the general loops.
template <typename T>
bool applyS8Fast(const int8_t* x, T* y, uint8_t* q, const T* r, const LaneLayout& L, int64_t P,
                 const float* scale, const float* shift, ActivationKind act, float alpha, float inv,
                 float zp, const U8Target& second = {}) {
    using K = ActivationKind;
    const bool pairs = L.lanes == 8 && (!second.q || second.positionStep(8) == 8);
    if ((L.lanes % 16 != 0 && !pairs) || L.spatial_stride != L.lanes ||
        L.paddedChannels() != L.channels ||
        !(act == K::kNone || act == K::kRelu || act == K::kLeakyRelu))
        return false;
    const int64_t cp = L.paddedChannels(), lanes = L.lanes;
    withActivation(act, [&](auto a) {
        constexpr int ACT = decltype(a)::value;
        if constexpr (ACT == static_cast<int>(K::kNone) || ACT == static_cast<int>(K::kRelu) ||
                      ACT == static_cast<int>(K::kLeakyRelu))
            forEachChunk(
                L, P,
                [&](int64_t n, int64_t g, int64_t off, int64_t count) {
                    T* yy = y ? y + off : nullptr;
                    uint8_t* qq = q ? q + off : nullptr;
                    const T* rr = r ? r + off : nullptr;
                    const float* sa = scale + n * cp + g * lanes;
                    const float* sb = shift + n * cp + g * lanes;
                    uint8_t* q2 = second.q ? second.at(off, lanes) : nullptr;
                    if (pairs)
                        applyChunkS8Pairs<ACT>(x + off, yy, qq, rr, count, sa, sb, alpha, inv, zp,
                                               q2, second.inv_scale, second.zero_point);
                    else
                        applyChunkS8<ACT>(x + off, yy, qq, rr, lanes, count, sa, sb, alpha, inv, zp,
                                          q2, second.inv_scale, second.zero_point,
                                          second.positionStep(lanes));
                },
                second);
    });
    return true;
}
#endif

void applyFromS8(const int8_t* x, void* y, const void* r, bool y_bf16, const LaneLayout& L,
                 int64_t P, const float* scale, const float* shift, ActivationKind act, float alpha,
                 const float* slope, const float* mask) {
#if defined(__AVX512F__)
    if ((y_bf16
             ? applyS8Fast(x, static_cast<uint16_t*>(y), nullptr, static_cast<const uint16_t*>(r),
                           L, P, scale, shift, act, alpha, 1.0f, 0.0f)
             : applyS8Fast(x, static_cast<float*>(y), nullptr, static_cast<const float*>(r), L, P,
                           scale, shift, act, alpha, 1.0f, 0.0f)))
        return;
#endif
    if (y_bf16)
        applyT<int8_t, uint16_t>(x, y, r, L, P, scale, shift, act, alpha, slope, mask);
    else
        applyT<int8_t, float>(x, y, r, L, P, scale, shift, act, alpha, slope, mask);
}

void applyU8(const void* x, void* y, uint8_t* q, const void* r, bool bf16, const LaneLayout& L,
             int64_t P, const float* scale, const float* shift, ActivationKind act, float alpha,
             const float* slope, float inv, float zp, float* buf, U8Target second) {
    if (bf16)
        applyU8T<uint16_t, uint16_t>(x, y, q, r, L, P, scale, shift, act, alpha, slope, inv, zp,
                                     buf, second);
    else
        applyU8T<float, float>(x, y, q, r, L, P, scale, shift, act, alpha, slope, inv, zp, buf,
                               second);
}

// Moments of one s8 chunk whose lanes are a multiple of 16: the sums of q and q^2 per lane in
// one pass, 16 lanes at a time in float registers, exact (|q| <= 128 and count <= 512 keep every
// sum below 2^24); M2 = sum q^2 - (sum q)^2 / count in double.
inline void chunkMomentsS8(const int8_t* base, int64_t lanes, int64_t count, float* mean,
                           float* m2) {
#if defined(__AVX512F__)
    for (int64_t l0 = 0; l0 < lanes; l0 += 16) {  // two accumulator pairs: half the chain
        __m512 s0 = _mm512_setzero_ps(), q0 = s0, s1 = s0, q1 = s0;
        auto at = [&](int64_t s) {
            return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + s * lanes + l0))));
        };
        int64_t s = 0;
        for (; s + 2 <= count; s += 2) {
            const __m512 v0 = at(s), v1 = at(s + 1);
            s0 = _mm512_add_ps(s0, v0);
            q0 = _mm512_fmadd_ps(v0, v0, q0);
            s1 = _mm512_add_ps(s1, v1);
            q1 = _mm512_fmadd_ps(v1, v1, q1);
        }
        if (s < count) {
            const __m512 v0 = at(s);
            s0 = _mm512_add_ps(s0, v0);
            q0 = _mm512_fmadd_ps(v0, v0, q0);
        }
        alignas(64) float sum[16], sq[16];
        _mm512_store_ps(sum, _mm512_add_ps(s0, s1));
        _mm512_store_ps(sq, _mm512_add_ps(q0, q1));
        for (int l = 0; l < 16; ++l) {
            const double n = static_cast<double>(count), t = sum[l];
            mean[l0 + l] = static_cast<float>(t / n);
            m2[l0 + l] = static_cast<float>(static_cast<double>(sq[l]) - t * t / n);
        }
    }
#else
    for (int64_t l0 = 0; l0 < lanes; l0 += 16) {
        float sum[16] = {}, sq[16] = {};
        for (int64_t s = 0; s < count; ++s) {
            const int8_t* p = base + s * lanes + l0;
#pragma omp simd
            for (int l = 0; l < 16; ++l) {
                const float v = static_cast<float>(p[l]);
                sum[l] += v;
                sq[l] += v * v;
            }
        }
        for (int l = 0; l < 16; ++l) {
            const double n = static_cast<double>(count), t = sum[l];
            mean[l0 + l] = static_cast<float>(t / n);
            m2[l0 + l] = static_cast<float>(static_cast<double>(sq[l]) - t * t / n);
        }
    }
#endif
}

#if defined(__AVX512F__)
// Moments of one chunk of 8 dense channels-last lanes (count <= 1024): pairs of positions as 16
// lanes, each register lane summing at most 512 values (exact in float, as above), lanes l and
// l + 8 and an odd last position added in double.
inline void chunkMomentsS8Pairs(const int8_t* base, int64_t count, float* mean, float* m2) {
    __m512 s0 = _mm512_setzero_ps(), q0 = s0;
    const int64_t pairs = count / 2;
    for (int64_t s = 0; s < pairs; ++s) {
        const __m512 v = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + s * 16))));
        s0 = _mm512_add_ps(s0, v);
        q0 = _mm512_fmadd_ps(v, v, q0);
    }
    alignas(64) float sum[16], sq[16];
    _mm512_store_ps(sum, s0);
    _mm512_store_ps(sq, q0);
    for (int l = 0; l < 8; ++l) {
        double t = double(sum[l]) + sum[l + 8], t2 = double(sq[l]) + sq[l + 8];
        if (count % 2) {
            const double v = base[pairs * 16 + l];
            t += v;
            t2 += v * v;
        }
        const double n = static_cast<double>(count);
        mean[l] = static_cast<float>(t / n);
        m2[l] = static_cast<float>(t2 - t * t / n);
    }
}
#endif

void momentsS8(const int8_t* x, const LaneLayout& L, int64_t P, int64_t chunks, float* cmean,
               float* cm2) {
#if defined(__AVX512F__)
    if (L.lanes == 8 && L.spatial_stride == 8 && P <= 1024) {
        forEachMomentChunk(L, P, chunks, [&](int64_t u, int64_t off, int64_t count) {
            chunkMomentsS8Pairs(x + off, count, &cmean[u * 8], &cm2[u * 8]);
        });
        return;
    }
#endif
    if (L.lanes % 16 != 0 || L.spatial_stride != L.lanes || P > 512) {
        momentsT(x, L, P, chunks, cmean, cm2);
        return;
    }
    forEachMomentChunk(L, P, chunks, [&](int64_t u, int64_t off, int64_t count) {
        chunkMomentsS8(x + off, L.lanes, count, &cmean[u * L.lanes], &cm2[u * L.lanes]);
    });
}

void applyU8FromS8(const int8_t* x, void* y, uint8_t* q, const void* r, bool y_bf16,
                   const LaneLayout& L, int64_t P, const float* scale, const float* shift,
                   ActivationKind act, float alpha, const float* slope, float inv, float zp,
                   float* buf, U8Target second) {
#if defined(__AVX512F__)
    if (y_bf16 ? applyS8Fast(x, static_cast<uint16_t*>(y), q, static_cast<const uint16_t*>(r), L, P,
                             scale, shift, act, alpha, inv, zp, second)
               : applyS8Fast(x, static_cast<float*>(y), q, static_cast<const float*>(r), L, P,
                             scale, shift, act, alpha, inv, zp, second))
        return;
#endif
    if (y_bf16)
        applyU8T<int8_t, uint16_t>(x, y, q, r, L, P, scale, shift, act, alpha, slope, inv, zp, buf,
                                   second);
    else
        applyU8T<int8_t, float>(x, y, q, r, L, P, scale, shift, act, alpha, slope, inv, zp, buf,
                                second);
}

}  // namespace voxseg::engine::cpu::VOXSEG_NORM_ISA
