// The reference backend: every op as plain loops over float32 row-major tensors. It is the oracle
// for the other backends, so it favours obviously-correct code over speed (double accumulators,
// no blocking, no threads). Spatial ops work on ranks 3..5 by treating missing spatial axes as
// size 1.
#include "engine/backend.h"
#include "engine/graph/broadcast.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine {
namespace {

// Spatial extent padded to three axes (D, H, W); 1D/2D tensors get leading 1s.
struct Dims3 {
    int64_t d = 1, h = 1, w = 1;
    int64_t size() const { return d * h * w; }
};

Dims3 spatial3(const Shape& s) {
    Dims3 r;
    const size_t sr = s.size() - 2;
    if (sr >= 1) r.w = s[s.size() - 1];
    if (sr >= 2) r.h = s[s.size() - 2];
    if (sr >= 3) r.d = s[s.size() - 3];
    return r;
}

// Per-axis attribute padded to three axes with `fill` for the missing leading axes.
std::array<int64_t, 3> pad3(const std::vector<int64_t>& v, int64_t fill) {
    std::array<int64_t, 3> r{fill, fill, fill};
    const size_t off = 3 - v.size();
    for (size_t i = 0; i < v.size(); ++i) r[off + i] = v[i];
    return r;
}

// Strides (in elements) of a row-major shape.
std::vector<int64_t> stridesOf(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void conv(const Node& n, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
    const ConvAttrs& a = n.conv;
    const int64_t N = x.dim(0), C = x.dim(1), M = y.dim(1), G = a.group;
    const Dims3 is = spatial3(x.shape()), os = spatial3(y.shape());
    const auto k = pad3(a.kernel, 1), s = pad3(a.strides, 1), dl = pad3(a.dilations, 1),
               p = pad3(a.pads_begin, 0);
    const int64_t cg = C / G, mg = M / G;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    float* yp = y.data<float>();
    for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t m = 0; m < M; ++m) {
            const int64_t g = m / mg;
            for (int64_t od = 0; od < os.d; ++od)
                for (int64_t oh = 0; oh < os.h; ++oh)
                    for (int64_t ow = 0; ow < os.w; ++ow) {
                        double acc = b ? b->data<float>()[m] : 0.0;
                        for (int64_t c = 0; c < cg; ++c)
                            for (int64_t kd = 0; kd < k[0]; ++kd) {
                                const int64_t id = od * s[0] - p[0] + kd * dl[0];
                                if (id < 0 || id >= is.d) continue;
                                for (int64_t kh = 0; kh < k[1]; ++kh) {
                                    const int64_t ih = oh * s[1] - p[1] + kh * dl[1];
                                    if (ih < 0 || ih >= is.h) continue;
                                    for (int64_t kw = 0; kw < k[2]; ++kw) {
                                        const int64_t iw = ow * s[2] - p[2] + kw * dl[2];
                                        if (iw < 0 || iw >= is.w) continue;
                                        const float xv =
                                            xp[(((nn * C + g * cg + c) * is.d + id) * is.h + ih) *
                                                   is.w +
                                               iw];
                                        const float wv =
                                            wp[(((m * cg + c) * k[0] + kd) * k[1] + kh) * k[2] +
                                               kw];
                                        acc += static_cast<double>(xv) * wv;
                                    }
                                }
                            }
                        yp[(((nn * M + m) * os.d + od) * os.h + oh) * os.w + ow] =
                            static_cast<float>(acc);
                    }
        }
}

// Transposed convolution as a scatter: every input voxel adds weight * value to the outputs
// its kernel covers.
void convTranspose(const Node& n, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
    const ConvAttrs& a = n.conv;
    const int64_t N = x.dim(0), C = x.dim(1), M = y.dim(1), G = a.group;
    const Dims3 is = spatial3(x.shape()), os = spatial3(y.shape());
    const auto k = pad3(a.kernel, 1), s = pad3(a.strides, 1), dl = pad3(a.dilations, 1),
               p = pad3(a.pads_begin, 0);
    const int64_t cg = C / G, mg = M / G;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    std::vector<double> acc(static_cast<size_t>(y.numel()), 0.0);
    for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < C; ++c) {
            const int64_t g = c / cg;
            for (int64_t id = 0; id < is.d; ++id)
                for (int64_t ih = 0; ih < is.h; ++ih)
                    for (int64_t iw = 0; iw < is.w; ++iw) {
                        const double xv = xp[(((nn * C + c) * is.d + id) * is.h + ih) * is.w + iw];
                        for (int64_t mm = 0; mm < mg; ++mm) {
                            const int64_t m = g * mg + mm;
                            for (int64_t kd = 0; kd < k[0]; ++kd) {
                                const int64_t od = id * s[0] - p[0] + kd * dl[0];
                                if (od < 0 || od >= os.d) continue;
                                for (int64_t kh = 0; kh < k[1]; ++kh) {
                                    const int64_t oh = ih * s[1] - p[1] + kh * dl[1];
                                    if (oh < 0 || oh >= os.h) continue;
                                    for (int64_t kw = 0; kw < k[2]; ++kw) {
                                        const int64_t ow = iw * s[2] - p[2] + kw * dl[2];
                                        if (ow < 0 || ow >= os.w) continue;
                                        const float wv =
                                            wp[(((c * mg + mm) * k[0] + kd) * k[1] + kh) * k[2] +
                                               kw];
                                        acc[(((nn * M + m) * os.d + od) * os.h + oh) * os.w + ow] +=
                                            xv * wv;
                                    }
                                }
                            }
                        }
                    }
        }
    float* yp = y.data<float>();
    const int64_t plane = os.size();
    for (int64_t i = 0; i < y.numel(); ++i)
        yp[i] = static_cast<float>(acc[i] + (b ? b->data<float>()[(i / plane) % M] : 0.0));
}

// Instance norm (groups == channels) and group norm: statistics over each group's channels
// and all spatial positions, then per-channel scale and bias.
void groupNorm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups, float eps,
               Tensor& y) {
    const int64_t N = x.dim(0), C = x.dim(1);
    const int64_t plane = x.numel() / (N * C);
    const int64_t cpg = C / groups;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const std::vector<float> sc = scale.toFloats(), bi = bias.toFloats();
    for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t g = 0; g < groups; ++g) {
            const float* base = xp + (nn * C + g * cpg) * plane;
            const int64_t count = cpg * plane;
            double sum = 0;
            for (int64_t i = 0; i < count; ++i) sum += base[i];
            const double mean = sum / static_cast<double>(count);
            double sq = 0;
            for (int64_t i = 0; i < count; ++i) sq += (base[i] - mean) * (base[i] - mean);
            const double inv = 1.0 / std::sqrt(sq / static_cast<double>(count) + eps);
            for (int64_t cc = 0; cc < cpg; ++cc) {
                const int64_t c = g * cpg + cc;
                for (int64_t i = 0; i < plane; ++i) {
                    const int64_t idx = (nn * C + c) * plane + i;
                    yp[idx] = static_cast<float>((xp[idx] - mean) * inv * sc[c] + bi[c]);
                }
            }
        }
}

void batchNorm(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) {
    const Tensor& x = *in[0];
    const int64_t N = x.dim(0), C = x.dim(1), plane = x.numel() / (N * C);
    const std::vector<float> sc = in[1]->toFloats(), bi = in[2]->toFloats(),
                             mean = in[3]->toFloats(), var = in[4]->toFloats();
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t c = (i / plane) % C;
        yp[i] = static_cast<float>(
            (xp[i] - mean[c]) / std::sqrt(double(var[c]) + n.norm.epsilon) * sc[c] + bi[c]);
    }
}

void softmax(int64_t axis, const Tensor& x, Tensor& y) {
    const Shape& s = x.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= s[i];
    for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
    const int64_t len = s[axis];
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            const int64_t base = o * len * inner + i;
            float mx = -std::numeric_limits<float>::infinity();
            for (int64_t k = 0; k < len; ++k) mx = std::max(mx, xp[base + k * inner]);
            double sum = 0;
            for (int64_t k = 0; k < len; ++k) sum += std::exp(double(xp[base + k * inner]) - mx);
            for (int64_t k = 0; k < len; ++k)
                yp[base + k * inner] =
                    static_cast<float>(std::exp(double(xp[base + k * inner]) - mx) / sum);
        }
}

void binary(OpKind op, const Tensor& a, const Tensor& b, Tensor& y) {
    const std::vector<float> av = a.toFloats(), bv = b.toFloats();
    float* yp = y.data<float>();
    auto each = [&](auto f) {
        forEachBroadcast<2>(
            y.shape(), {&a.shape(), &b.shape()},
            [&](int64_t i, const std::array<int64_t, 2>& o) { yp[i] = f(av[o[0]], bv[o[1]]); });
    };
    switch (op) {
        case OpKind::kAdd:
            each([](float u, float v) { return u + v; });
            break;
        case OpKind::kSub:
            each([](float u, float v) { return u - v; });
            break;
        case OpKind::kMul:
            each([](float u, float v) { return u * v; });
            break;
        default:
            each([](float u, float v) { return u / v; });
            break;
    }
}

void concat(int64_t axis, const std::vector<const Tensor*>& in, Tensor& y) {
    const Shape& s = y.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= s[i];
    for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
    float* yp = y.data<float>();
    for (int64_t o = 0; o < outer; ++o) {
        int64_t offset = 0;
        for (const Tensor* t : in) {
            const int64_t len = t->dim(axis) * inner;
            const float* src = t->data<float>() + o * len;
            std::copy(src, src + len, yp + o * s[axis] * inner + offset);
            offset += len;
        }
    }
}

// Input coordinate for output index `o` along one axis (ONNX Resize coordinate modes). Computed
// in float32 like ONNX Runtime and PyTorch: nearest modes flip at exact ties otherwise.
double resizeCoord(const ResizeAttrs& r, int64_t o, int64_t in, int64_t out, float scale) {
    const float of = static_cast<float>(o);
    switch (r.coord) {
        case ResizeCoord::kHalfPixel:
            return (of + 0.5f) / scale - 0.5f;
        case ResizeCoord::kPytorchHalfPixel:
            return out > 1 ? (of + 0.5f) / scale - 0.5f : 0.0f;
        case ResizeCoord::kAlignCorners:
            return out > 1 ? of * static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
        case ResizeCoord::kAsymmetric:
            return of / scale;
    }
    return 0.0;
}

int64_t nearestIndex(NearestRounding mode, double x, int64_t in) {
    double r;
    switch (mode) {
        case NearestRounding::kRoundPreferFloor:
            r = (x - std::floor(x) == 0.5) ? std::floor(x) : std::round(x);
            break;
        case NearestRounding::kRoundPreferCeil:
            r = std::round(x);  // rounds halves away from zero, i.e. up for x >= 0
            if (x < 0 && x - std::floor(x) == 0.5) r = std::ceil(x);
            break;
        case NearestRounding::kFloor:
            r = std::floor(x);
            break;
        default:
            r = std::ceil(x);
            break;
    }
    return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

// Separable resize: per axis, each output index reads two input indices with two weights
// (nearest: one index, weight 1).
void resize(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& is = x.shape();
    const Shape& os = y.shape();
    const size_t rank = is.size();
    struct Tap {
        int64_t i0, i1;
        double w1;
    };
    std::vector<std::vector<Tap>> taps(rank);
    for (size_t a = 0; a < rank; ++a) {
        for (int64_t o = 0; o < os[a]; ++o) {
            const float scale = n.resize.scales[a];
            const double c = resizeCoord(n.resize, o, is[a], os[a], scale);
            if (n.resize.mode == ResizeMode::kNearest) {
                const int64_t i = nearestIndex(n.resize.nearest, c, is[a]);
                taps[a].push_back({i, i, 0.0});
            } else {
                const double cc = std::clamp(c, 0.0, double(is[a] - 1));
                const int64_t i0 = static_cast<int64_t>(std::floor(cc));
                const int64_t i1 = std::min(i0 + 1, is[a] - 1);
                taps[a].push_back({i0, i1, cc - double(i0)});
            }
        }
    }
    const std::vector<int64_t> ist = stridesOf(is);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    std::vector<int64_t> idx(rank);
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat;
        for (size_t a = rank; a-- > 0;) {
            idx[a] = r % os[a];
            r /= os[a];
        }
        // Sum over the 2^rank corners; axes with weight 0 contribute one corner.
        double acc = 0;
        for (uint32_t corner = 0; corner < (1u << rank); ++corner) {
            double wgt = 1;
            int64_t off = 0;
            for (size_t a = 0; a < rank; ++a) {
                const Tap& t = taps[a][idx[a]];
                const bool hi = (corner >> a) & 1u;
                if (hi && t.w1 == 0.0) {
                    wgt = 0;
                    break;
                }
                wgt *= hi ? t.w1 : 1.0 - t.w1;
                off += (hi ? t.i1 : t.i0) * ist[a];
            }
            if (wgt != 0) acc += wgt * xp[off];
        }
        yp[flat] = static_cast<float>(acc);
    }
}

void pool(const Node& n, const Tensor& x, Tensor& y) {
    const PoolAttrs& pa = n.pool;
    const int64_t NC = x.dim(0) * x.dim(1);
    const Dims3 is = spatial3(x.shape()), os = spatial3(y.shape());
    const auto k = pad3(pa.kernel, 1), s = pad3(pa.strides, 1), dl = pad3(pa.dilations, 1),
               p = pad3(pa.pads_begin, 0), pe = pad3(pa.pads_end, 0);
    const bool is_max = n.op == OpKind::kMaxPool;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const std::array<int64_t, 3> in_dims{is.d, is.h, is.w};
    for (int64_t c = 0; c < NC; ++c)
        for (int64_t od = 0; od < os.d; ++od)
            for (int64_t oh = 0; oh < os.h; ++oh)
                for (int64_t ow = 0; ow < os.w; ++ow) {
                    const std::array<int64_t, 3> o{od, oh, ow};
                    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
                    int64_t valid = 0;
                    int64_t padded = 1;  // window positions inside input + padding
                    for (int a = 0; a < 3; ++a) {
                        int64_t cnt = 0;
                        for (int64_t kk = 0; kk < k[a]; ++kk) {
                            const int64_t i = o[a] * s[a] - p[a] + kk * dl[a];
                            if (i < in_dims[a] + pe[a]) ++cnt;
                        }
                        padded *= cnt;
                    }
                    for (int64_t kd = 0; kd < k[0]; ++kd) {
                        const int64_t id = od * s[0] - p[0] + kd * dl[0];
                        if (id < 0 || id >= is.d) continue;
                        for (int64_t kh = 0; kh < k[1]; ++kh) {
                            const int64_t ih = oh * s[1] - p[1] + kh * dl[1];
                            if (ih < 0 || ih >= is.h) continue;
                            for (int64_t kw = 0; kw < k[2]; ++kw) {
                                const int64_t iw = ow * s[2] - p[2] + kw * dl[2];
                                if (iw < 0 || iw >= is.w) continue;
                                const float v = xp[((c * is.d + id) * is.h + ih) * is.w + iw];
                                acc = is_max ? std::max<double>(acc, v) : acc + v;
                                ++valid;
                            }
                        }
                    }
                    if (!is_max) {
                        const int64_t div = pa.count_include_pad ? padded : valid;
                        acc = div > 0 ? acc / double(div) : 0.0;
                    }
                    yp[((c * os.d + od) * os.h + oh) * os.w + ow] = static_cast<float>(acc);
                }
}

void pad(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& is = x.shape();
    const Shape& os = y.shape();
    const std::vector<int64_t> ist = stridesOf(is);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        bool outside = false;
        for (size_t a = is.size(); a-- > 0;) {
            int64_t i = r % os[a] - n.pad.pads_begin[a];
            r /= os[a];
            if (i < 0 || i >= is[a]) {
                switch (n.pad.mode) {
                    case PadAttrs::Mode::kConstant:
                        outside = true;
                        break;
                    case PadAttrs::Mode::kEdge:
                        i = std::clamp<int64_t>(i, 0, is[a] - 1);
                        break;
                    case PadAttrs::Mode::kReflect:
                        i = i < 0 ? -i : 2 * (is[a] - 1) - i;
                        break;
                }
            }
            off += i * ist[a];
        }
        yp[flat] = outside ? n.pad.value : xp[off];
    }
}

void transpose(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& os = y.shape();
    const std::vector<int64_t> ist = stridesOf(x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = os.size(); a-- > 0;) {
            off += (r % os[a]) * ist[n.perm[a]];
            r /= os[a];
        }
        yp[flat] = xp[off];
    }
}

void slice(const Node& n, const Tensor& x, Tensor& y) {
    const std::vector<SliceAxis> axes = resolveSlice(n, x.shape());
    const Shape& os = y.shape();
    const std::vector<int64_t> ist = stridesOf(x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = os.size(); a-- > 0;) {
            off += (axes[a].start + (r % os[a]) * axes[a].step) * ist[a];
            r /= os[a];
        }
        yp[flat] = xp[off];
    }
}

// numpy matmul: batch dims broadcast, [M, K] x [K, N] per batch, double accumulators; then the
// optional bias [N] added along the last axis (in float, after the product is rounded).
void matmul(const Tensor& a, const Tensor& b, const Tensor* bias, Tensor& y) {
    const Shape& as = a.shape();
    const Shape& bs = b.shape();
    const Shape& ys = y.shape();
    const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
    const Shape batch(ys.begin(), ys.end() - 2);
    const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
    const float* ap = a.data<float>();
    const float* bp = b.data<float>();
    float* yp = y.data<float>();
    for (int64_t i = 0; i < numel(batch); ++i) {
        const float* am = ap + broadcastOffset(i, batch, a_batch) * M * K;
        const float* bm = bp + broadcastOffset(i, batch, b_batch) * K * N;
        float* ym = yp + i * M * N;
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += static_cast<double>(am[m * K + k]) * bm[k * N + n];
                ym[m * N + n] = static_cast<float>(acc);
            }
    }
    if (bias) {
        const float* biasp = bias->data<float>();
        for (int64_t i = 0; i < y.numel(); ++i) yp[i] += biasp[i % N];
    }
}

// Normalises each of the prod(shape[:axis]) rows over the trailing prod(shape[axis:]) values.
void layerNorm(const Node& n, const Tensor& x, const Tensor& scale, const Tensor* bias, Tensor& y) {
    int64_t inner = 1;
    for (size_t i = static_cast<size_t>(n.axis); i < x.shape().size(); ++i) inner *= x.dim(i);
    const int64_t outer = x.numel() / inner;
    const float* xp = x.data<float>();
    const float* sp = scale.data<float>();
    const float* bp = bias ? bias->data<float>() : nullptr;
    float* yp = y.data<float>();
    for (int64_t o = 0; o < outer; ++o) {
        const float* row = xp + o * inner;
        double sum = 0;
        for (int64_t i = 0; i < inner; ++i) sum += row[i];
        const double mean = sum / static_cast<double>(inner);
        double sq = 0;
        for (int64_t i = 0; i < inner; ++i) sq += (row[i] - mean) * (row[i] - mean);
        const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + n.norm.epsilon);
        for (int64_t i = 0; i < inner; ++i)
            yp[o * inner + i] =
                static_cast<float>((row[i] - mean) * inv * sp[i] + (bp ? bp[i] : 0.0));
    }
}

// Normalises the C values of each (n, position) of an [N, C, ...] tensor.
void channelLayerNorm(const Node& n, const Tensor& x, const Tensor& scale, const Tensor* bias,
                      Tensor& y) {
    const int64_t batch = x.dim(0), channels = x.dim(1);
    const int64_t spatial = x.numel() / (batch * channels);
    const float* sp = scale.data<float>();
    const float* bp = bias ? bias->data<float>() : nullptr;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < spatial; ++s) {
            const float* xp = x.data<float>() + b * channels * spatial + s;
            float* yp = y.data<float>() + b * channels * spatial + s;
            double sum = 0;
            for (int64_t c = 0; c < channels; ++c) sum += xp[c * spatial];
            const double mean = sum / static_cast<double>(channels);
            double sq = 0;
            for (int64_t c = 0; c < channels; ++c)
                sq += (xp[c * spatial] - mean) * (xp[c * spatial] - mean);
            const double inv = 1.0 / std::sqrt(sq / static_cast<double>(channels) + n.norm.epsilon);
            for (int64_t c = 0; c < channels; ++c)
                yp[c * spatial] =
                    static_cast<float>((xp[c * spatial] - mean) * inv * sp[c] + (bp ? bp[c] : 0.0));
        }
}

void reduce(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& xs = x.shape();
    // The output index of every input element: reduced axes collapse to 0.
    Shape kept = xs;
    for (size_t i = 0; i < xs.size(); ++i)
        if (n.reduce_axes.empty() || std::find(n.reduce_axes.begin(), n.reduce_axes.end(),
                                               int64_t(i)) != n.reduce_axes.end())
            kept[i] = 1;
    const std::vector<int64_t> kst = stridesOf(kept);
    const bool is_max = n.op == OpKind::kReduceMax;
    std::vector<double> acc(static_cast<size_t>(y.numel()),
                            is_max ? -std::numeric_limits<double>::infinity() : 0.0);
    const float* xp = x.data<float>();
    for (int64_t flat = 0; flat < x.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = xs.size(); a-- > 0;) {
            const int64_t c = r % xs[a];
            r /= xs[a];
            off += (kept[a] == 1 ? 0 : c) * kst[a];
        }
        acc[off] = is_max ? std::max<double>(acc[off], xp[flat]) : acc[off] + xp[flat];
    }
    const double count =
        static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(y.numel(), 1));
    float* yp = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i)
        yp[i] = static_cast<float>(n.op == OpKind::kReduceMean ? acc[i] / count : acc[i]);
}

// y's element at each coordinate (i_a) is x's at (source(a, i_a)).
template <typename Source>
void gatherCoords(const Tensor& x, Tensor& y, Source source) {
    const Shape& ys = y.shape();
    const std::vector<int64_t> ist = stridesOf(x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = ys.size(); a-- > 0;) {
            off += source(a, r % ys[a]) * ist[a];
            r /= ys[a];
        }
        yp[flat] = xp[off];
    }
}

void tile(const Tensor& x, Tensor& y) {
    const Shape& xs = x.shape();
    gatherCoords(x, y, [&](size_t a, int64_t i) { return i % xs[a]; });
}

// y[..., i, ...] = x[..., (i - shift) mod n, ...] along every axis.
void roll(const Tensor& x, const std::vector<int64_t>& shifts, Tensor& y) {
    const Shape& xs = x.shape();
    gatherCoords(x, y, [&](size_t a, int64_t i) { return (i - shifts[a] + xs[a]) % xs[a]; });
}

// softmax(Q Kt * scale + bias) V for `items` work items of Tq query rows, one row at a time;
// q(b, i, d), k(b, d, j), v(b, j, e) read the operands, out(b, i, e) is the output element,
// bias(b, i, j) the score's bias (0 without one).
template <typename Q, typename K, typename V, typename Out, typename Bias>
void attendRows(int64_t items, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv, float scale, Q q, K k,
                V v, Out out, Bias bias) {
    std::vector<double> row(static_cast<size_t>(Tk));
    for (int64_t b = 0; b < items; ++b)
        for (int64_t i = 0; i < Tq; ++i) {
            double mx = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j < Tk; ++j) {
                double acc = 0;
                for (int64_t d = 0; d < D; ++d) acc += double(q(b, i, d)) * k(b, d, j);
                row[j] = acc * scale + bias(b, i, j);
                mx = std::max(mx, row[j]);
            }
            double sum = 0;
            for (int64_t j = 0; j < Tk; ++j) sum += row[j] = std::exp(row[j] - mx);
            for (int64_t e = 0; e < Dv; ++e) {
                double acc = 0;
                for (int64_t j = 0; j < Tk; ++j) acc += row[j] * v(b, j, e);
                out(b, i, e) = static_cast<float>(acc / sum);
            }
        }
}

// The sum of an attention node's biases (inputs 3 and 4, each optional) at a score's flat index
// in `scores`, each broadcast (batch axes also tiled) as broadcastOffset does.
class ScoreBiases {
  public:
    ScoreBiases(const std::vector<const Tensor*>& in, Shape scores) : scores_(std::move(scores)) {
        for (size_t i = 3; i < in.size(); ++i)
            if (in[i]) terms_.emplace_back(in[i]->toFloats(), in[i]->shape());
    }
    double at(int64_t flat) const {
        double sum = 0;
        for (const auto& [values, shape] : terms_)
            sum += values[static_cast<size_t>(broadcastOffset(flat, scores_, shape))];
        return sum;
    }

  private:
    Shape scores_;
    std::vector<std::pair<std::vector<float>, Shape>> terms_;
};

// Attention on [..., T, D] operands, K given transposed.
void attention(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) {
    const Tensor &q = *in[0], &kt = *in[1], &v = *in[2];
    const Shape& qs = q.shape();
    const size_t r = qs.size();
    const int64_t Tq = qs[r - 2], D = qs[r - 1], Tk = kt.shape()[r - 1], Dv = v.shape()[r - 1];
    Shape scores = qs;
    scores[r - 1] = Tk;
    const ScoreBiases biases(in, scores);
    const float *qp = q.data<float>(), *kp = kt.data<float>(), *vp = v.data<float>();
    float* yp = y.data<float>();
    attendRows(
        q.numel() / (Tq * D), Tq, Tk, D, Dv, n.attention_scale,
        [&](int64_t b, int64_t i, int64_t d) { return qp[(b * Tq + i) * D + d]; },
        [&](int64_t b, int64_t d, int64_t j) { return kp[(b * D + d) * Tk + j]; },
        [&](int64_t b, int64_t j, int64_t e) { return vp[(b * Tk + j) * Dv + e]; },
        [&](int64_t b, int64_t i, int64_t e) -> float& { return yp[(b * Tq + i) * Dv + e]; },
        [&](int64_t b, int64_t i, int64_t j) { return biases.at((b * Tq + i) * Tk + j); });
}

// MultiHeadAttention: work item b is batch item b / H, head b % H of the packed [B, T, H*D] rows.
void multiHeadAttention(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) {
    const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
    const int64_t B = q.dim(0), Tq = q.dim(1), Tk = k.dim(1), H = n.attention_heads;
    const int64_t D = q.dim(2) / H, Dv = v.dim(2) / H;
    const ScoreBiases biases(in, {B, H, Tq, Tk});
    const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
    float* yp = y.data<float>();
    auto at = [&](int64_t b, int64_t t, int64_t T, int64_t d, int64_t width) {
        return ((b / H) * T + t) * H * width + (b % H) * width + d;
    };
    attendRows(
        B * H, Tq, Tk, D, Dv, n.attention_scale,
        [&](int64_t b, int64_t i, int64_t d) { return qp[at(b, i, Tq, d, D)]; },
        [&](int64_t b, int64_t d, int64_t j) { return kp[at(b, j, Tk, d, D)]; },
        [&](int64_t b, int64_t j, int64_t e) { return vp[at(b, j, Tk, e, Dv)]; },
        [&](int64_t b, int64_t i, int64_t e) -> float& { return yp[at(b, i, Tq, e, Dv)]; },
        [&](int64_t b, int64_t i, int64_t j) { return biases.at((b * Tq + i) * Tk + j); });
}

double geluExact(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double geluTanh(double v) {
    const double k = std::sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
}

// out = act(out [+ residual]) for epilogues fused by optimize().
void applyEpilogue(const Node& n, const std::vector<Tensor>& env, Tensor& y) {
    float* yp = y.data<float>();
    if (n.fused_residual >= 0) {
        const float* rp = env[n.fused_residual].data<float>();
        for (int64_t i = 0; i < y.numel(); ++i) yp[i] += rp[i];
    }
    switch (n.fused_activation) {
        case ActivationKind::kNone:
            break;
        case ActivationKind::kRelu:
            for (int64_t i = 0; i < y.numel(); ++i) yp[i] = std::max(yp[i], 0.0f);
            break;
        case ActivationKind::kLeakyRelu:
            for (int64_t i = 0; i < y.numel(); ++i)
                yp[i] = yp[i] >= 0 ? yp[i] : yp[i] * n.fused_alpha;
            break;
        case ActivationKind::kSigmoid:
            for (int64_t i = 0; i < y.numel(); ++i) yp[i] = sigmoid(yp[i]);
            break;
        case ActivationKind::kSilu:
            for (int64_t i = 0; i < y.numel(); ++i) yp[i] *= sigmoid(yp[i]);
            break;
        case ActivationKind::kPRelu: {
            const Tensor& slope = env[n.fused_prelu_slope];
            const std::vector<float> sv = slope.toFloats();
            forEachBroadcast<1>(y.shape(), {&slope.shape()},
                                [&](int64_t i, const std::array<int64_t, 1>& o) {
                                    if (yp[i] < 0) yp[i] *= sv[o[0]];
                                });
            break;
        }
    }
}

// y = x where x >= 0, else x * slope (the slope broadcast to x).
void prelu(const Tensor& x, const Tensor& slope, Tensor& y) {
    const std::vector<float> sv = slope.toFloats();
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    forEachBroadcast<1>(y.shape(), {&slope.shape()},
                        [&](int64_t i, const std::array<int64_t, 1>& o) {
                            yp[i] = xp[i] >= 0 ? xp[i] : xp[i] * sv[o[0]];
                        });
}

// The mean of each channel's plane, in double.
void globalAveragePool(const Tensor& x, Tensor& y) {
    const int64_t nc = y.numel();
    const int64_t plane = x.numel() / nc;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t c = 0; c < nc; ++c) {
        double sum = 0;
        for (int64_t i = 0; i < plane; ++i) sum += xp[c * plane + i];
        yp[c] = static_cast<float>(sum / double(plane));
    }
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y) {
    const std::vector<float> c = cond.toFloats(), av = a.toFloats(), bv = b.toFloats();
    float* yp = y.data<float>();
    forEachBroadcast<3>(y.shape(), {&cond.shape(), &a.shape(), &b.shape()},
                        [&](int64_t i, const std::array<int64_t, 3>& o) {
                            yp[i] = c[o[0]] != 0 ? av[o[1]] : bv[o[2]];
                        });
}

void expand(const Tensor& x, Tensor& y) {
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    forEachBroadcast<1>(y.shape(), {&x.shape()},
                        [&](int64_t i, const std::array<int64_t, 1>& o) { yp[i] = xp[o[0]]; });
}

// Interleaved-pair rotary embedding: y = x * cos + rotate(x) * sin, the tables [tokens, dim]
// repeated over the leading axes.
void rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y) {
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const std::vector<float> cs = cos.toFloats(), sn = sin.toFloats();
    const int64_t d = y.shape().back();
    const int64_t table = static_cast<int64_t>(cs.size());
    for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t j = i % table;
        const float rot = (i % d) % 2 == 0 ? -xp[i + 1] : xp[i - 1];
        yp[i] = xp[i] * cs[j] + rot * sn[j];
    }
}

Status runNode(const Graph& g, const Node& n, std::vector<Tensor>& env) {
    std::vector<const Tensor*> in;
    for (ValueId v : n.inputs) in.push_back(v >= 0 ? &env[v] : nullptr);
    for (size_t i = 0; i < in.size(); ++i)
        if (in[i] && in[i]->empty())
            return internalError("reference: node '" + n.name + "' input " + std::to_string(i) +
                                 " was not computed");
    Tensor y(DType::kFloat32, g.values[n.outputs[0]].shape);
    float* yp = y.data<float>();
    auto unary = [&](auto f) {
        const float* xp = in[0]->data<float>();
        for (int64_t i = 0; i < y.numel(); ++i) yp[i] = f(xp[i]);
    };
    switch (n.op) {
        case OpKind::kConv:
            conv(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kConvTranspose:
            convTranspose(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kInstanceNorm:
            groupNorm(*in[0], *in[1], *in[2], in[0]->dim(1), n.norm.epsilon, y);
            break;
        case OpKind::kGroupNorm:
            groupNorm(*in[0], *in[1], *in[2], n.norm.num_groups, n.norm.epsilon, y);
            break;
        case OpKind::kBatchNorm:
            batchNorm(n, in, y);
            break;
        case OpKind::kRelu:
            unary([](float v) { return std::max(v, 0.0f); });
            break;
        case OpKind::kLeakyRelu:
            unary([&](float v) { return v >= 0 ? v : v * n.alpha; });
            break;
        case OpKind::kPRelu:
            prelu(*in[0], *in[1], y);
            break;
        case OpKind::kSigmoid:
            unary(sigmoid);
            break;
        case OpKind::kTanh:
            unary([](float v) { return std::tanh(v); });
            break;
        case OpKind::kClip:
            unary([&](float v) { return std::min(std::max(v, n.clip_min), n.clip_max); });
            break;
        case OpKind::kIdentity:
        case OpKind::kReshape:
            unary([](float v) { return v; });
            break;
        case OpKind::kSoftmax:
            softmax(n.axis, *in[0], y);
            break;
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv:
            binary(n.op, *in[0], *in[1], y);
            break;
        case OpKind::kConcat:
            concat(n.axis, in, y);
            break;
        case OpKind::kResize:
            resize(n, *in[0], y);
            break;
        case OpKind::kMaxPool:
        case OpKind::kAveragePool:
            pool(n, *in[0], y);
            break;
        case OpKind::kGlobalAveragePool:
            globalAveragePool(*in[0], y);
            break;
        case OpKind::kPad:
            pad(n, *in[0], y);
            break;
        case OpKind::kTranspose:
            transpose(n, *in[0], y);
            break;
        case OpKind::kSlice:
            slice(n, *in[0], y);
            break;
        case OpKind::kMatMul:
            matmul(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kLayerNorm:
            layerNorm(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kChannelLayerNorm:
            channelLayerNorm(n, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr, y);
            break;
        case OpKind::kErf:
            unary([](float v) { return std::erf(v); });
            break;
        case OpKind::kGelu:
            if (n.gelu_tanh)
                unary([](float v) { return static_cast<float>(geluTanh(v)); });
            else
                unary([](float v) { return static_cast<float>(geluExact(v)); });
            break;
        case OpKind::kSilu:
            unary([](float v) { return static_cast<float>(v / (1.0 + std::exp(-double(v)))); });
            break;
        case OpKind::kSqrt:
            unary([](float v) { return std::sqrt(v); });
            break;
        case OpKind::kSin:
            unary([](float v) { return std::sin(v); });
            break;
        case OpKind::kCos:
            unary([](float v) { return std::cos(v); });
            break;
        case OpKind::kReduceMean:
        case OpKind::kReduceSum:
        case OpKind::kReduceMax:
            reduce(n, *in[0], y);
            break;
        case OpKind::kWhere:
            where(*in[0], *in[1], *in[2], y);
            break;
        case OpKind::kExpand:
            expand(*in[0], y);
            break;
        case OpKind::kTile:
            tile(*in[0], y);
            break;
        case OpKind::kRoll:
            roll(*in[0], n.roll_shifts, y);
            break;
        case OpKind::kAttention:
            attention(n, in, y);
            break;
        case OpKind::kMultiHeadAttention:
            multiHeadAttention(n, in, y);
            break;
        case OpKind::kRotary:
            rotary(*in[0], *in[1], *in[2], y);
            break;
    }
    applyEpilogue(n, env, y);
    env[n.outputs[0]] = std::move(y);
    return Status::ok();
}

class ReferenceCompiled : public CompiledGraph {
  public:
    explicit ReferenceCompiled(Graph g) : graph_(std::move(g)) {
        for (ValueId v : graph_.inputs) input_shapes_.push_back(graph_.values[v].shape);
        for (ValueId v : graph_.outputs) output_shapes_.push_back(graph_.values[v].shape);
    }
    const std::vector<Shape>& inputShapes() const override { return input_shapes_; }
    const std::vector<Shape>& outputShapes() const override { return output_shapes_; }

    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
        if (inputs.size() != input_shapes_.size())
            return invalidArgument("reference: expected " + std::to_string(input_shapes_.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
        std::vector<Tensor> env(graph_.values.size());
        for (size_t i = 0; i < graph_.values.size(); ++i)
            if (graph_.values[i].constant) {
                const Tensor& c = *graph_.values[i].constant;
                env[i] =
                    c.dtype() == DType::kFloat32 ? c : Tensor::fromFloats(c.shape(), c.toFloats());
            }
        for (size_t i = 0; i < inputs.size(); ++i) {
            if (inputs[i].shape() != input_shapes_[i] || inputs[i].dtype() != DType::kFloat32)
                return invalidArgument("reference: input " + std::to_string(i) + " is " +
                                       std::string(dtypeName(inputs[i].dtype())) + " " +
                                       shapeToString(inputs[i].shape()) +
                                       ", compiled for float32 " + shapeToString(input_shapes_[i]));
            env[graph_.inputs[i]] = inputs[i];
        }
        try {
            for (const Node& n : graph_.nodes) VOXSEG_RETURN_IF_ERROR(runNode(graph_, n, env));
        } catch (const std::bad_alloc&) {
            return Status(StatusCode::kOutOfMemory,
                          "reference backend: out of host memory for the activations");
        }
        outputs.clear();
        for (ValueId v : graph_.outputs) {
            if (env[v].empty())
                return internalError("reference: output '" + graph_.values[v].name +
                                     "' was not computed");
            outputs.push_back(env[v]);
        }
        return Status::ok();
    }

    size_t workspaceBytes() const override {
        size_t bytes = 0;
        for (const Node& n : graph_.nodes)
            bytes += static_cast<size_t>(numel(graph_.values[n.outputs[0]].shape)) * 4;
        return bytes;
    }
    std::string describe() const override {
        return "reference: " + std::to_string(graph_.nodes.size()) +
               " nodes, plain loops, fp32, NCDHW, no buffer reuse";
    }

  private:
    Graph graph_;
    std::vector<Shape> input_shapes_, output_shapes_;
};

class ReferenceBackend : public Backend {
  public:
    std::string name() const override { return "reference"; }
    std::string deviceDescription() const override { return "host CPU, plain loops, 1 thread"; }
    bool supportsPrecision(Precision p) const override { return p == Precision::kFloat32; }

    Result<std::unique_ptr<CompiledGraph>> compile(const Graph& graph,
                                                   const std::vector<Shape>& input_shapes,
                                                   const CompileOptions& options) override {
        if (options.precision != Precision::kFloat32)
            return unsupported(std::string("reference backend computes in fp32 only, not ") +
                               precisionName(options.precision));
        Graph g = graph;
        VOXSEG_RETURN_IF_ERROR(g.inferShapes(input_shapes));
        for (const Node& n : g.nodes)
            if (n.outputs.empty() || n.outputs[0] < 0)
                return invalidArgument("node '" + n.name + "' has no output");
        return std::unique_ptr<CompiledGraph>(new ReferenceCompiled(std::move(g)));
    }
};

}  // namespace

std::unique_ptr<Backend> makeReferenceBackend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace voxseg::engine
