// torch's CPU interpolation, nnInteractive's pooling and Python/NumPy rounding and sampling,
// restated (see resample.h). Every formula keeps torch's operand types and order: the goldens
// compare bit for bit.
#include "edit/interactive/resample.h"

#include "engine/graph/tensor.h"
#include "engine/inference/half_kernels.h"

#include <cmath>

namespace voxseg::edit::interactive {

uint16_t toHalf(float value) { return engine::floatToHalf(value); }
const float* halfTable() { return engine::half::toFloatTable(); }
void halfRowToFloat(const uint16_t* src, float* dst, int64_t n) {
    engine::half::toFloatRow(src, dst, n);
}

namespace {

// torch's nearest_idx (UpSample.h): copy when sizes match, shift for exactly 2x, else
// floor(i * (float(in) / out)) clamped to the input.
std::vector<int64_t> nearestIndices(int64_t in, int64_t out) {
    std::vector<int64_t> idx(out);
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    for (int64_t i = 0; i < out; ++i) {
        if (out == in) {
            idx[i] = i;
        } else if (out == 2 * in) {
            idx[i] = i >> 1;
        } else {
            const float src = static_cast<float>(i) * scale;
            idx[i] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
        }
    }
    return idx;
}

// torch's compute_source_index_and_lambda (align_corners=False) for one axis.
struct LinearTap {
    int64_t i0 = 0, i1 = 0;
    float l0 = 1.0f, l1 = 0.0f;
};

std::vector<LinearTap> linearTaps(int64_t in, int64_t out) {
    std::vector<LinearTap> taps(out);
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    for (int64_t i = 0; i < out; ++i) {
        LinearTap& t = taps[i];
        if (in == out) {
            t.i0 = t.i1 = i;
            continue;
        }
        float real = scale * (static_cast<float>(i) + 0.5f) - 0.5f;
        if (real < 0.0f) real = 0.0f;
        t.i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
        t.l1 = std::min(std::max(real - static_cast<float>(t.i0), 0.0f), 1.0f);
        t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
        t.l0 = 1.0f - t.l1;
    }
    return taps;
}

// adaptive pooling's start_index / end_index.
int64_t startIndex(int64_t a, int64_t b, int64_t c) { return (a / b) * c + ((a % b) * c) / b; }
int64_t endIndex(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

// Max (min) over [i - r, i + r] clipped to the line, along one axis of a (z, y, x) volume.
template <typename V>
void poolAxis(const std::vector<V>& in, std::vector<V>& out, const Index3& shape, int axis, int r,
              bool use_min) {
    const int64_t n = shape[axis];
    const int64_t stride = axis == 0 ? shape[1] * shape[2] : axis == 1 ? shape[2] : 1;
    const int64_t outer = axis == 0 ? 1 : axis == 1 ? shape[0] : shape[0] * shape[1];
    const int64_t inner = axis == 0 ? shape[1] * shape[2] : axis == 1 ? shape[2] : 1;
    const int64_t outer_stride = axis == 2 ? shape[2] : n * inner;
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < inner; ++k) {
            const int64_t base = o * outer_stride + k;
            for (int64_t i = 0; i < n; ++i) {
                const int64_t a = std::max<int64_t>(0, i - r), b = std::min<int64_t>(n - 1, i + r);
                V v = in[base + a * stride];
                for (int64_t j = a + 1; j <= b; ++j) {
                    const V w = in[base + j * stride];
                    v = use_min ? std::min(v, w) : std::max(v, w);
                }
                out[base + i * stride] = v;
            }
        }
}

template <typename V>
std::vector<V> poolSeparable(std::vector<V> a, const Index3& shape, int kernel, bool use_min) {
    const int r = (kernel - 1) / 2;
    if (r == 0) return a;
    std::vector<V> b(a.size());
    poolAxis(a, b, shape, 0, r, use_min);
    poolAxis(b, a, shape, 1, r, use_min);
    poolAxis(a, b, shape, 2, r, use_min);
    return b;
}

}  // namespace

std::vector<uint16_t> resizeNearest(const uint16_t* in, const Index3& in_shape,
                                    const Index3& out_shape) {
    const auto iz = nearestIndices(in_shape[0], out_shape[0]);
    const auto iy = nearestIndices(in_shape[1], out_shape[1]);
    const auto ix = nearestIndices(in_shape[2], out_shape[2]);
    std::vector<uint16_t> out(static_cast<size_t>(voxelCount(out_shape)));
    uint16_t* o = out.data();
    for (int64_t z = 0; z < out_shape[0]; ++z)
        for (int64_t y = 0; y < out_shape[1]; ++y) {
            const uint16_t* row = in + (iz[z] * in_shape[1] + iy[y]) * in_shape[2];
            for (int64_t x = 0; x < out_shape[2]; ++x) *o++ = row[ix[x]];
        }
    return out;
}

std::vector<uint16_t> resizeArea(const uint16_t* in, const Index3& in_shape,
                                 const Index3& out_shape, const Box* support) {
    std::vector<uint16_t> out(static_cast<size_t>(voxelCount(out_shape)), 0);
    // Outputs whose window misses the support read only zeros: they stay 0.
    Index3 o_lo{0, 0, 0}, o_hi = out_shape;
    if (support) {
        for (int d = 0; d < 3; ++d) {
            while (o_lo[d] < out_shape[d] &&
                   endIndex(o_lo[d], out_shape[d], in_shape[d]) <= support->lo[d])
                ++o_lo[d];
            while (o_hi[d] > o_lo[d] &&
                   startIndex(o_hi[d] - 1, out_shape[d], in_shape[d]) >= support->hi[d])
                --o_hi[d];
        }
    }
    const int64_t ih = in_shape[1], iw = in_shape[2];
    for (int64_t od = o_lo[0]; od < o_hi[0]; ++od) {
        const int64_t d0 = startIndex(od, out_shape[0], in_shape[0]);
        const int64_t d1 = endIndex(od, out_shape[0], in_shape[0]);
        for (int64_t oh = o_lo[1]; oh < o_hi[1]; ++oh) {
            const int64_t h0 = startIndex(oh, out_shape[1], in_shape[1]);
            const int64_t h1 = endIndex(oh, out_shape[1], in_shape[1]);
            uint16_t* o = out.data() + (od * out_shape[1] + oh) * out_shape[2];
            for (int64_t ow = o_lo[2]; ow < o_hi[2]; ++ow) {
                const int64_t w0 = startIndex(ow, out_shape[2], in_shape[2]);
                const int64_t w1 = endIndex(ow, out_shape[2], in_shape[2]);
                // torch accumulates a Half input in Half (every sum rounded to fp16) and
                // divides by each window extent in Half.
                uint16_t sum = 0;
                for (int64_t d = d0; d < d1; ++d)
                    for (int64_t h = h0; h < h1; ++h) {
                        const uint16_t* row = in + (d * ih + h) * iw;
                        for (int64_t w = w0; w < w1; ++w)
                            if (row[w]) sum = toHalf(fromHalf(sum) + fromHalf(row[w]));
                    }
                for (const int64_t k : {d1 - d0, h1 - h0, w1 - w0})
                    sum = toHalf(fromHalf(sum) / fromHalf(toHalf(static_cast<float>(k))));
                o[ow] = sum;
            }
        }
    }
    return out;
}

std::vector<float> resizeTrilinear(const float* in, const Index3& in_shape,
                                   const Index3& out_shape) {
    // torch's generic kernel (upsample_generic_Nd_kernel_impl): two taps per axis, nested from
    // depth (outermost) to width, each level t0 * w0 + t1 * w1, which torch's build contracts
    // to fma(t0, w0, t1 * w1) (the goldens tell the contracted from the plain form).
    const auto tz = linearTaps(in_shape[0], out_shape[0]);
    const auto ty = linearTaps(in_shape[1], out_shape[1]);
    const auto tx = linearTaps(in_shape[2], out_shape[2]);
    const int64_t sy = in_shape[2], sz = in_shape[1] * in_shape[2];
    std::vector<float> out(static_cast<size_t>(voxelCount(out_shape)));
    float* o = out.data();
    for (const LinearTap& d : tz)
        for (const LinearTap& h : ty) {
            const float* r00 = in + d.i0 * sz + h.i0 * sy;
            const float* r01 = in + d.i0 * sz + h.i1 * sy;
            const float* r10 = in + d.i1 * sz + h.i0 * sy;
            const float* r11 = in + d.i1 * sz + h.i1 * sy;
            for (const LinearTap& w : tx) {
                const auto lerp = [](float t0, float w0, float t1, float w1) {
                    return std::fma(t0, w0, t1 * w1);
                };
                const float t00 = lerp(r00[w.i0], w.l0, r00[w.i1], w.l1);
                const float t01 = lerp(r01[w.i0], w.l0, r01[w.i1], w.l1);
                const float t10 = lerp(r10[w.i0], w.l0, r10[w.i1], w.l1);
                const float t11 = lerp(r11[w.i0], w.l0, r11[w.i1], w.l1);
                *o++ = lerp(lerp(t00, h.l0, t01, h.l1), d.l0, lerp(t10, h.l0, t11, h.l1), d.l1);
            }
        }
    return out;
}

std::vector<uint16_t> poolSame(const uint16_t* in, const Index3& shape, int kernel, bool use_min) {
    const size_t n = static_cast<size_t>(voxelCount(shape));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) f[i] = fromHalf(in[i]);
    f = poolSeparable(std::move(f), shape, kernel, use_min);
    std::vector<uint16_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = toHalf(f[i]);
    return out;
}

std::vector<uint8_t> poolSame(const uint8_t* in, const Index3& shape, int kernel, bool use_min) {
    return poolSeparable(std::vector<uint8_t>(in, in + voxelCount(shape)), shape, kernel, use_min);
}

void divideHalf(uint16_t* data, int64_t count, double divisor) {
    const float b = static_cast<float>(divisor);
    for (int64_t i = 0; i < count; ++i)
        if (data[i]) data[i] = toHalf(fromHalf(data[i]) / b);  // +0 / b stays +0
}

int roundToNearestOdd(double value) {
    const auto cl = static_cast<int64_t>(std::ceil(value));
    const auto fl = static_cast<int64_t>(std::floor(value));
    if (cl % 2 == 1) return static_cast<int>(cl);
    if (fl % 2 == 1) return static_cast<int>(fl);
    return static_cast<int>(roundHalfEven(value) + 1);
}

int64_t roundHalfEven(double value) { return static_cast<int64_t>(std::nearbyint(value)); }

int64_t numpyChoice(std::mt19937& rng, int64_t n) {
    const uint64_t range = static_cast<uint64_t>(n - 1);
    if (range == 0) return 0;
    uint64_t mask = range;
    for (int s = 1; s <= 32; s <<= 1) mask |= mask >> s;
    uint64_t v;
    if (range <= 0xffffffffULL) {
        do {
            v = static_cast<uint64_t>(rng()) & mask;
        } while (v > range);
    } else {
        do {
            const uint64_t hi = rng();
            v = ((hi << 32) | static_cast<uint64_t>(rng())) & mask;
        } while (v > range);
    }
    return static_cast<int64_t>(v);
}

std::optional<Box> clipBox(const Box& box, const Index3& shape) {
    Box c;
    for (int d = 0; d < 3; ++d) {
        c.lo[d] = std::max<int64_t>(0, box.lo[d]);
        c.hi[d] = std::min<int64_t>(box.hi[d], shape[d]);
        if (c.hi[d] <= c.lo[d]) return std::nullopt;
    }
    return c;
}

}  // namespace voxseg::edit::interactive
