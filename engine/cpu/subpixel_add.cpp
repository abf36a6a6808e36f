// SubpixelAdd (op_kind.h) in the cpu backend's plan: the folded up-sampling's parity
// convolution P added into the skip convolution's result Y, in place, with the border
// correction (engine/passes/fold_upsampling.h). Our own kernel: oneDNN has no depth-to-space.
// P, Y and the output share one layout: P's when it is channels-last, or channel blocks that
// divide the output channels; else channels-last (reorders before). float32 or bf16 (the plan's
// activation type; the sum is taken in float32 and rounded once).
#include "engine/cpu/norm_kernels.h"
#include "engine/cpu/plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace voxseg::engine::cpu {
namespace {

// Where channel c of voxel sp of batch item n lies, in elements.
struct Layout {
    int64_t block = 0;  // 0: channels-last
    int64_t channels = 0, spatial = 0;
    int64_t at(int64_t n, int64_t c, int64_t sp) const {
        if (block == 0) return (n * spatial + sp) * channels + c;
        return ((n * (channels / block) + c / block) * spatial + sp) * block + c % block;
    }
};

// One row of fine voxels along W: y = s + P's parity (+ the border correction). The float sum
// is rounded once (bf16: to nearest even). A plain loop, and AVX-512 intrinsics for bf16 runs
// of a multiple of 8 channels where kernelIsa() allows them (the same values, NaN payloads
// apart: the same float operations in the same order).
struct Row {
    int64_t w = 0, len = 0;          // voxels, channels per run
    int64_t y_step = 0, p_step = 0;  // elements from one voxel to the next (y and s; P)
    int64_t g_step = 0;              // from one W parity to the next within a P voxel
    int64_t fx = 1;                  // W's factor
    const float *first = nullptr, *mid = nullptr, *last = nullptr;  // corrections, or null
    const float *bias = nullptr, *inv = nullptr;  // s8 output: per channel of the run
};

inline float widen(float v) { return v; }
inline float widen(uint16_t v) { return bfloat16ToFloat(v); }
inline void narrow(float* p, float v) { *p = v; }
inline void narrow(uint16_t* p, float v) { *p = floatToBFloat16(v); }

// s8 output (int8_policy.h dst_s8): (y - bias[c]) * inv[c] rounded to nearest even and
// saturated, as the int8 convolution writes a normalisation's 8-bit input.
inline void narrow(int8_t* p, float v, const float* bias, const float* inv) {
    const float q = std::nearbyint((v - bias[0]) * inv[0]);
    *p = static_cast<int8_t>(std::clamp(q, -128.0f, 127.0f));
}

// Fine voxel x of a row: its output, skip and parity runs and its correction (or null).
template <typename T, typename Out>
struct Voxel {
    Out* y;
    const T* s;
    const T* p;
    const float* corr;
};
template <typename T, typename Out>
inline Voxel<T, Out> voxelOf(Out* y, const T* s, const T* p, const Row& r, int64_t x) {
    const int64_t px = r.fx == 2 ? (x & 1) : 0, jx = r.fx == 2 ? (x >> 1) + px : x;
    return {y + x * r.y_step, s + x * r.y_step, p + jx * r.p_step + px * r.g_step,
            x == 0         ? r.first
            : x == r.w - 1 ? r.last
                           : r.mid};
}

template <typename T, typename Out>
void addRow(Out* y, const T* s, const T* p, const Row& r) {
    for (int64_t x = 0; x < r.w; ++x) {
        const auto [yy, ss, pp, c] = voxelOf(y, s, p, r, x);
        for (int64_t i = 0; i < r.len; ++i) {
            const float v = widen(ss[i]) + widen(pp[i]) + (c ? c[i] : 0.0f);
            if constexpr (std::is_same_v<Out, int8_t>) {
                narrow(yy + i, v, r.bias + i, r.inv + i);
            } else {
                narrow(yy + i, v);
            }
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
// bf16 runs of a multiple of 8 channels on AVX-512: 16 at a time in zmm, a last 8 in ymm (GCC
// vectorised the loop above poorly: 71 ms for the 128^3 x 32 stage of the big network,
// 5.7 GB/s; the interactive network's 64^3 x 8 stage 3.3 ms); the same values.
#define VOXSEG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
VOXSEG_AVX512 inline __m512 widen16(const uint16_t* q) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))), 16));
}
VOXSEG_AVX512 inline __m256 widen8(const uint16_t* q) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))), 16));
}

// 16 channels: v (+ the correction) written as bf16 (to nearest even) or as s8.
template <typename Out>
VOXSEG_AVX512 inline void store16(Out* yy, __m512 v, const float* c, const Row& r, int64_t i) {
    if (c) v = _mm512_add_ps(v, _mm512_loadu_ps(c + i));
    if constexpr (std::is_same_v<Out, int8_t>) {
        v = _mm512_mul_ps(_mm512_sub_ps(v, _mm512_loadu_ps(r.bias + i)),
                          _mm512_loadu_ps(r.inv + i));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(yy + i),
                         _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
    } else {
        const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
        __m512i u = _mm512_castps_si512(v);
        u = _mm512_add_epi32(
            u, _mm512_add_epi32(round, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(yy + i),
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
    }
}
// The same for 8 channels.
template <typename Out>
VOXSEG_AVX512 inline void store8(Out* yy, __m256 v, const float* c, const Row& r, int64_t i) {
    if (c) v = _mm256_add_ps(v, _mm256_loadu_ps(c + i));
    if constexpr (std::is_same_v<Out, int8_t>) {
        v = _mm256_mul_ps(_mm256_sub_ps(v, _mm256_loadu_ps(r.bias + i)),
                          _mm256_loadu_ps(r.inv + i));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(yy + i),
                         _mm256_cvtsepi32_epi8(_mm256_cvtps_epi32(v)));
    } else {
        const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
        __m256i u = _mm256_castps_si256(v);
        u = _mm256_add_epi32(
            u, _mm256_add_epi32(round, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(yy + i),
                         _mm256_cvtepi32_epi16(_mm256_srli_epi32(u, 16)));
    }
}

template <typename Out>
VOXSEG_AVX512 void addRowBf16Avx512(Out* y, const uint16_t* s, const uint16_t* p, const Row& r) {
    for (int64_t x = 0; x < r.w; ++x) {
        const auto [yy, ss, pp, c] = voxelOf(y, s, p, r, x);
        // P's runs lie a voxel's G * O values apart: the hardware prefetcher does not follow
        // them (big's 128^3 stage 30.8 -> 16.4 ms with this, the same output).
        if (x + 8 < r.w)
            _mm_prefetch(reinterpret_cast<const char*>(voxelOf(y, s, p, r, x + 8).p), _MM_HINT_T0);
        int64_t i = 0;
        for (; i + 16 <= r.len; i += 16)
            store16(yy, _mm512_add_ps(widen16(ss + i), widen16(pp + i)), c, r, i);
        if (i < r.len) store8(yy, _mm256_add_ps(widen8(ss + i), widen8(pp + i)), c, r, i);
    }
}
#undef VOXSEG_AVX512
bool haveAvx512bw() { return kernelIsa() == KernelIsa::kAvx512; }  // honours the ISA cap
#else
template <typename Out>
void addRowBf16Avx512(Out*, const uint16_t*, const uint16_t*, const Row&) {}
bool haveAvx512bw() { return false; }
#endif

struct Geometry {
    std::array<int64_t, 3> size{}, psize{}, factor{};
    int64_t batch = 0, oc = 0, run = 0;  // run: channels per contiguous run
    Layout y, p;
};

// The s8 output's per-channel bias and 1 / scale.
struct S8Params {
    std::vector<float> bias, inv;
};

template <typename T, typename Out>
Kernel subpixelAddKernel(const Geometry& geo, std::shared_ptr<const std::vector<float>> corr,
                         std::shared_ptr<const S8Params> s8) {
    return [geo, corr, s8](const std::vector<dnnl::memory>& m) {
        const T* pp = static_cast<const T*>(m[0].get_data_handle());
        const T* sp = static_cast<const T*>(m[1].get_data_handle());
        Out* yp = static_cast<Out*>(m[2].get_data_handle());
        const int64_t d = geo.size[0], h = geo.size[1], w = geo.size[2];
        const auto& f = geo.factor;
        const int64_t runs = geo.oc / geo.run, oc = geo.oc;
        const float* cp = corr ? corr->data() : nullptr;
        const bool fast = geo.run % 8 == 0 && haveAvx512bw();
        auto axis = [&](int a, int64_t i, int64_t& j, int64_t& par) {
            par = f[a] == 2 ? i % 2 : 0;
            j = f[a] == 2 ? i / 2 + par : i;
            return (i == 0 ? 1 : 0) + (i == geo.size[a] - 1 ? 2 : 0);
        };
        // Steps along W and between W parities, from the layouts.
        const int64_t y_step = geo.y.at(0, 0, 1) - geo.y.at(0, 0, 0);
        const int64_t p_step = geo.p.at(0, 0, 1) - geo.p.at(0, 0, 0);
        const int64_t g_step = geo.p.at(0, oc, 0) - geo.p.at(0, 0, 0);
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < geo.batch * runs * d * h; ++r) {
            const int64_t yy = r % h, z = (r / h) % d, cb = (r / (h * d)) % runs,
                          n = r / (h * d * runs);
            int64_t jz, pz, jy, py;
            const int64_t cz = axis(0, z, jz, pz), cy = axis(1, yy, jy, py);
            const int64_t c0 = cb * geo.run, g0 = (pz * f[1] + py) * f[2];
            Row row{w, geo.run, y_step, p_step, g_step, f[2]};
            if (cp) {
                const int64_t base = (cz * 4 + cy) * 4;
                auto at = [&](int64_t cx) {
                    return base + cx == 0 ? nullptr : cp + (base + cx) * oc + c0;
                };
                row.first = at(1 + (w == 1 ? 2 : 0));
                row.mid = at(0);
                row.last = at(2);
            }
            if (s8) {
                row.bias = s8->bias.data() + c0;
                row.inv = s8->inv.data() + c0;
            }
            const int64_t yi = geo.y.at(n, c0, (z * h + yy) * w);
            const int64_t pi = geo.p.at(n, g0 * oc + c0, (jz * geo.psize[1] + jy) * geo.psize[2]);
            if constexpr (std::is_same_v<T, uint16_t>)
                if (fast) {
                    addRowBf16Avx512(yp + yi, sp + yi, pp + pi, row);
                    continue;
                }
            addRow(yp + yi, sp + yi, pp + pi, row);
        }
    };
}

}  // namespace

Status planSubpixelAdd(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId p = n.inputs[0], s = n.inputs[1], y = n.outputs[0];
    if (!plan.has(p) || !plan.has(s))
        return nodeError(plan, "SubpixelAdd: its inputs are not computed before it");
    const Shape& ps = g.values[p].shape;
    const Shape& ys = g.values[y].shape;
    if (ys.size() != 5 || n.subpixel.size() != 3)
        return nodeError(plan, "SubpixelAdd: only 3-D tensors");
    const dt type = plan.actType();
    const int64_t oc = ys[1];
    const quant::Int8Layer* q8 = plan.int8Layer();
    const bool s8 = q8 && q8->dst_s8;  // channels-last, as the norm reads it
    // P's channel block when it divides the output channels, else channels-last.
    int64_t block = 0;
    const dnnl::memory::desc& pmd = plan.desc(p);
    for (int64_t b : {16, 8})
        if (!s8 && oc % b == 0 &&
            pmd == dnnl::memory::desc(toDims(ps), pmd.data_type(),
                                      b == 16 ? tag::nCdhw16c : tag::nCdhw8c))
            block = b;
    auto layout = [&](const Shape& shape, dt t) {
        if (block == 0) return dnnl::memory::desc(toDims(shape), t, tag::ndhwc);
        return dnnl::memory::desc(toDims(shape), t, block == 16 ? tag::nCdhw16c : tag::nCdhw8c);
    };
    VOXSEG_ASSIGN_OR_RETURN(MemRef pref, plan.ensure(p, layout(ps, type)));
    VOXSEG_ASSIGN_OR_RETURN(MemRef sref, plan.ensure(s, layout(ys, type)));
    MemRef out;
    if (s8) {
        out = plan.newBuffer(layout(ys, dt::s8));
    } else if (auto in_place = plan.tryInPlace(s, layout(ys, type))) {
        out = *in_place;
    } else {
        out = plan.newBuffer(layout(ys, type));
    }
    Geometry geo;
    geo.batch = ys[0];
    geo.oc = oc;
    geo.run = block == 0 ? oc : block;
    for (int a = 0; a < 3; ++a) {
        geo.size[a] = ys[2 + a];
        geo.psize[a] = ps[2 + a];
        geo.factor[a] = n.subpixel[static_cast<size_t>(a)];
    }
    geo.y = {block, oc, ys[2] * ys[3] * ys[4]};
    geo.p = {block, ps[1], ps[2] * ps[3] * ps[4]};
    std::shared_ptr<const std::vector<float>> corr;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0)
        corr = std::make_shared<const std::vector<float>>(g.constant(n.inputs[2]).toFloats());
    std::shared_ptr<const S8Params> params;
    if (s8) {
        if (static_cast<int64_t>(q8->s8_scales.size()) != oc)
            return nodeError(plan, "int8: 8-bit output scales do not match its channels");
        auto sp = std::make_shared<S8Params>();
        sp->bias.assign(static_cast<size_t>(oc), 0.0f);
        if (q8->drop_bias && n.inputs.size() > 3 && n.inputs[3] >= 0)
            sp->bias = g.constant(n.inputs[3]).toFloats();
        for (float sc : q8->s8_scales) sp->inv.push_back(1.0f / sc);
        params = std::move(sp);
    }
    Kernel kernel;
    if (s8) {
        kernel = type == dt::bf16 ? subpixelAddKernel<uint16_t, int8_t>(geo, corr, params)
                                  : subpixelAddKernel<float, int8_t>(geo, corr, params);
    } else {
        kernel = type == dt::bf16 ? subpixelAddKernel<uint16_t, uint16_t>(geo, corr, params)
                                  : subpixelAddKernel<float, float>(geo, corr, params);
    }
    plan.addKernel("subpixel add " + descName(pref.md) + " + " + descName(sref.md) +
                       (s8 ? "->" + descName(out.md) : ""),
                   std::move(kernel), {pref, sref, out});
    plan.define(y, out);
    return Status::ok();
}

}  // namespace voxseg::engine::cpu
