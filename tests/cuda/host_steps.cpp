#include "tests/cuda/host_steps.h"

#include "cuda/cuda_planner.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

namespace voxseg::cuda::testing {
namespace {

using planning::Step;
using TKind = TensorStep::Kind;

float* at(const TensorDesc& d, int64_t flat, const int64_t* shape) {
    return static_cast<float*>(d.data) + math::stridedOffset(flat, d.rank, shape, d.mod, d.strides);
}

// Row-major D[b] = A[b] B[b] (+ C[b]) (+ bias) as an LtGemm plan describes it.
void gemm(const GemmPlan& p, const float* a, const float* b, const float* c, const float* bias,
          float* d) {
    for (int64_t n = 0; n < p.batch; ++n)
        for (int64_t i = 0; i < p.m; ++i)
            for (int64_t j = 0; j < p.n; ++j) {
                double acc = 0;
                for (int64_t k = 0; k < p.k; ++k)
                    acc += double(a[n * p.stride_a + i * p.lda + k]) *
                           b[n * p.stride_b + k * p.ldb + j];
                const int64_t o = n * p.stride_d + i * p.ldd + j;
                if (c) acc += c[o];
                if (bias) acc += bias[j];
                d[o] = float(acc);
            }
}

void attention(const TensorStep& s) {
    const auto* q = static_cast<const float*>(s.da.data);
    const auto* kt = static_cast<const float*>(s.db.data);
    auto* y = static_cast<float*>(s.dy.data);
    for (int64_t q0 = 0; q0 < s.tq; q0 += s.tile) {
        const int64_t rows = std::min(s.tile, s.tq - q0);
        gemm(attentionPlan(s, rows, false), q + q0 * s.dh, kt, nullptr, nullptr, s.scratch_ptr);
        for (int64_t r = 0; r < s.batch * rows; ++r) {
            const int64_t b = r / rows, i = r % rows;
            float* row = s.scratch_ptr + r * s.tk;
            float mx = -FLT_MAX;
            for (int64_t c = 0; c < s.tk; ++c) {
                row[c] *= s.scale;
                for (const TensorDesc* bias : {&s.dc, &s.dmask})
                    if (bias->data)
                        row[c] += *at(*bias, (b * s.tq + q0 + i) * s.tk + c, bias->shape);
                mx = std::max(mx, row[c]);
            }
            double sum = 0;
            for (int64_t c = 0; c < s.tk; ++c) sum += row[c] = std::exp(row[c] - mx);
            for (int64_t c = 0; c < s.tk; ++c) row[c] = float(row[c] / sum);
        }
        gemm(attentionPlan(s, rows, true), s.scratch_ptr, s.v_ptr, nullptr, nullptr, y + q0 * s.dv);
    }
}

void reduce(const TensorStep& s) {
    const TensorDesc &x = s.da, &y = s.dy;
    std::vector<double> acc(size_t(y.numel()), s.reduce == ReduceKind::kMax ? -INFINITY : 0.0);
    for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t rest = i, o = 0, mul = 1;
        for (int a = x.rank - 1; a >= 0; --a) {
            const int64_t idx = rest % x.shape[a];
            rest /= x.shape[a];
            if (y.shape[a] != 1) o += idx * mul;
            mul *= y.shape[a];
        }
        const double v = *at(x, i, x.shape);
        acc[o] = s.reduce == ReduceKind::kMax ? std::max(acc[o], v) : acc[o] + v;
    }
    const double count = double(x.numel()) / double(std::max<int64_t>(y.numel(), 1));
    for (int64_t o = 0; o < y.numel(); ++o)
        *at(y, o, y.shape) = float(s.reduce == ReduceKind::kMean ? acc[o] / count : acc[o]);
}

void pool(const TensorStep& s) {
    const TensorDesc &x = s.da, &y = s.dy;
    for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t o[5], rest = i;
        for (int a = 4; a >= 0; --a) o[a] = rest % y.shape[a], rest /= y.shape[a];
        math::PoolWindow w[3];
        int64_t padded = 1;
        for (int a = 0; a < 3; ++a) {
            w[a] = math::poolWindow(o[a + 2], x.shape[a + 2], s.pool.kernel[a], s.pool.stride[a],
                                    s.pool.pad[a], s.pool.pad_end[a]);
            padded *= w[a].padded;
        }
        double acc = s.pool.max ? -INFINITY : 0.0;
        int64_t valid = 0;
        for (int64_t d = w[0].begin; d < w[0].end; ++d)
            for (int64_t h = w[1].begin; h < w[1].end; ++h)
                for (int64_t v = w[2].begin; v < w[2].end; ++v, ++valid) {
                    const float e = static_cast<const float*>(
                        x.data)[o[0] * x.strides[0] + o[1] * x.strides[1] + d * x.strides[2] +
                                h * x.strides[3] + v * x.strides[4]];
                    acc = s.pool.max ? std::max(acc, double(e)) : acc + e;
                }
        if (!s.pool.max) acc = acc / double(s.pool.count_include_pad ? padded : valid);
        *at(y, i, y.shape) = float(acc);
    }
}

void runTensor(const TensorStep& s) {
    const int64_t n = s.dy.numel();
    auto* y = static_cast<float*>(s.dy.data);
    const auto* x = static_cast<const float*>(s.da.data);
    switch (s.kind) {
        case TKind::kCopy:
            for (int64_t i = 0; i < n; ++i) *at(s.dy, i, s.dy.shape) = *at(s.da, i, s.dy.shape);
            break;
        case TKind::kFill:
            for (int64_t i = 0; i < n; ++i) *at(s.dy, i, s.dy.shape) = s.value;
            break;
        case TKind::kEltwise: {
            const int arity = math::eltArity(s.op);
            for (int64_t i = 0; i < n; ++i) {
                const float a = *at(s.da, i, s.dy.shape);
                const float b = arity > 1 ? *at(s.db, i, s.dy.shape) : 0.0f;
                const float c = arity > 2 ? *at(s.dc, i, s.dy.shape) : 0.0f;
                *at(s.dy, i, s.dy.shape) = math::eltwise(s.op, a, b, c, s.alpha, s.lo, s.hi);
            }
            break;
        }
        case TKind::kRotary:
            for (int64_t i = 0; i < n; ++i)
                y[i] = math::rotary(x, i, s.cols, static_cast<const float*>(s.db.data),
                                    static_cast<const float*>(s.dc.data), s.b.numel());
            break;
        case TKind::kLayerNorm: {
            const RowView &xr = s.x_rows, &yr = s.y_rows;
            auto start = [](const RowView& v, int64_t r) {
                return (r / v.inner) * v.outer_stride + (r % v.inner) * v.inner_stride;
            };
            const auto* g = static_cast<const float*>(s.db.data);
            const auto* b = static_cast<const float*>(s.dc.data);
            auto* yd = static_cast<float*>(s.dy.data);
            for (int64_t r = 0; r < xr.outer * xr.inner; ++r) {
                const float* row = x + start(xr, r);
                double mean = 0, sq = 0;
                for (int64_t c = 0; c < s.cols; ++c) mean += row[c * xr.col_stride];
                mean /= double(s.cols);
                for (int64_t c = 0; c < s.cols; ++c)
                    sq += (row[c * xr.col_stride] - mean) * (row[c * xr.col_stride] - mean);
                const double rstd = 1.0 / std::sqrt(sq / double(s.cols) + s.epsilon);
                for (int64_t c = 0; c < s.cols; ++c)
                    yd[start(yr, r) + c * yr.col_stride] =
                        float((row[c * xr.col_stride] - mean) * rstd * g[c] + (b ? b[c] : 0.0));
            }
            break;
        }
        case TKind::kSoftmax:
            for (int64_t o = 0; o < s.outer; ++o)
                for (int64_t in = 0; in < s.inner; ++in) {
                    const int64_t base = o * s.len * s.inner + in;
                    float mx = -FLT_MAX;
                    for (int64_t k = 0; k < s.len; ++k) mx = std::max(mx, x[base + k * s.inner]);
                    double sum = 0;
                    for (int64_t k = 0; k < s.len; ++k) sum += std::exp(x[base + k * s.inner] - mx);
                    for (int64_t k = 0; k < s.len; ++k)
                        y[base + k * s.inner] = float(std::exp(x[base + k * s.inner] - mx) / sum);
                }
            break;
        case TKind::kReduce:
            reduce(s);
            break;
        case TKind::kPool:
            pool(s);
            break;
        case TKind::kMatMul:
            gemm(s.gemm, x, static_cast<const float*>(s.db.data),
                 static_cast<const float*>(s.dres.data), static_cast<const float*>(s.dc.data), y);
            break;
        case TKind::kAttention:
            attention(s);
            break;
    }
}

// An int8 or fp8 convolution (cuda/int8_conv.h) as the device runs it, fp32 storage: per chunk of
// rows the im2col bytes, the product (int8: s8 x s8 -> s32, exact; fp8: the e4m3 values' products,
// each exact in float, summed in double and rounded once, the exact result cuBLASLt's fp32 sums
// approximate) and the epilogue, with int8_math.h's functions.
void runInt8Conv(const Step& s, const Int8ConvPlan& p) {
    const math::Int8Geometry& g = p.geometry;  // its ldc / c_offset: the planned source view
    const auto* src = static_cast<const float*>(s.va.data);
    const bool fp8 = p.format == math::Format8::kE4M3;
    // Filled with 0x5a, as the device's scratch is never cleared: every byte must be written.
    std::vector<int8_t> a(size_t(p.chunk_rows * g.kp));
    const size_t results = size_t(p.chunk_rows * p.cout_padded);
    std::vector<int32_t> d(fp8 ? 0 : results);  // the product: s32 (int8) or float (fp8)
    std::vector<float> df(fp8 ? results : 0);
    const auto load = [](const float* v, int64_t i) { return v[i]; };
    const int64_t rows = g.rows();
    for (int64_t row0 = 0; row0 < rows; row0 += p.chunk_rows) {
        const int64_t n = std::min(p.chunk_rows, rows - row0);
        std::fill(a.begin(), a.end(), int8_t{0x5a});
        for (int64_t r = 0; r < p.chunk_rows; ++r)
            for (int64_t slot = 0; slot < math::int8Im2colSlots(g); ++slot) {
                if (fp8)
                    math::int8Im2colSlot(g, src, load, p.e4m3Quantizer(), row0, n, r, slot,
                                         a.data());
                else
                    math::int8Im2colSlot(g, src, load, p.int8Quantizer(), row0, n, r, slot,
                                         a.data());
            }
        for (int64_t r = 0; r < p.chunk_rows; ++r)
            for (int64_t o = 0; o < p.cout_padded; ++o) {
                const int8_t* ar = a.data() + r * g.kp;
                const int8_t* wr = p.weights + o * g.kp;
                const size_t at = size_t(r * p.cout_padded + o);
                if (fp8) {
                    double acc = 0.0;
                    for (int64_t k = 0; k < g.kp; ++k)
                        acc += double(math::e4m3Value(uint8_t(ar[k]))) *
                               math::e4m3Value(uint8_t(wr[k]));
                    df[at] = float(acc);
                } else {
                    int32_t acc = 0;
                    for (int64_t k = 0; k < g.kp; ++k) acc += int32_t(ar[k]) * wr[k];
                    d[at] = acc;
                }
            }
        auto* y = static_cast<float*>(s.vy.data);
        const auto* res = static_cast<const float*>(s.vres.data);
        for (int64_t r = 0; r < n; ++r)
            for (int64_t o = 0; o < p.cout; ++o) {
                const int64_t row = row0 + r;
                const float rv =
                    p.has_residual ? res[row * s.vres.ldc + s.vres.c_offset + o] : 0.0f;
                const size_t at = size_t(r * p.cout_padded + o);
                const float f = fp8 ? math::fp8Dequantised(df[at], p.channels[o], p.has_bias,
                                                           p.has_residual, rv)
                                    : math::int8Dequantised(d[at], p.channels[o], p.has_bias,
                                                            p.has_residual, rv);
                y[row * s.vy.ldc + s.vy.c_offset + o] = math::int8Activate(f, p.act, p.alpha);
            }
    }
}

// A cuDNN convolution step (forward or transposed) as plain loops over the channels-last views
// and the planner's packed weights ([K][taps][C/g] forward, [Cin][taps][Cout/g] transposed),
// accumulating in double; fp32 storage.
void runConv(const Step& s, const ConvShape& cs) {
    const auto* x = static_cast<const float*>(s.va.data);
    auto* y = static_cast<float*>(s.vy.data);
    const auto* w = static_cast<const float*>(s.w_ptr);
    const auto& in = cs.in;
    const auto& out = cs.out;
    const int64_t taps = cs.kernel[0] * cs.kernel[1] * cs.kernel[2];
    const int64_t in_sp = in[0] * in[1] * in[2], out_sp = out[0] * out[1] * out[2];
    // Input voxel of output voxel (od, oh, ow) through tap (kd, kh, kw) (forward), or -1.
    auto inputVoxel = [&](const int64_t o[3], const int64_t k[3]) -> int64_t {
        int64_t v = 0;
        for (int a = 0; a < 3; ++a) {
            const int64_t i = o[a] * cs.stride[a] - cs.pad[a] + k[a] * cs.dilation[a];
            if (i < 0 || i >= in[a]) return -1;
            v = v * in[a] + i;
        }
        return v;
    };
    auto xAt = [&](int64_t n, int64_t voxel, int64_t c) {
        return double(x[(n * in_sp + voxel) * s.va.ldc + s.va.c_offset + c]);
    };
    auto yAt = [&](int64_t n, int64_t voxel, int64_t c) -> float& {
        return y[(n * out_sp + voxel) * s.vy.ldc + s.vy.c_offset + c];
    };
    if (!cs.transposed) {
        const int64_t cg = cs.in_channels / cs.groups, kg = cs.out_channels / cs.groups;
        for (int64_t n = 0; n < cs.n; ++n)
            for (int64_t ov = 0; ov < out_sp; ++ov) {
                const int64_t o[3] = {ov / (out[1] * out[2]), ov / out[2] % out[1], ov % out[2]};
                for (int64_t k = 0; k < cs.out_channels; ++k) {
                    double acc = 0;
                    for (int64_t t = 0; t < taps; ++t) {
                        const int64_t kk[3] = {t / (cs.kernel[1] * cs.kernel[2]),
                                               t / cs.kernel[2] % cs.kernel[1], t % cs.kernel[2]};
                        const int64_t iv = inputVoxel(o, kk);
                        if (iv < 0) continue;
                        for (int64_t c = 0; c < cg; ++c)
                            acc += double(w[(k * taps + t) * cg + c]) * xAt(n, iv, k / kg * cg + c);
                    }
                    yAt(n, ov, k) = float(acc);
                }
            }
        return;
    }
    const int64_t cin = cs.in_channels, cog = cs.out_channels / cs.groups, cig = cin / cs.groups;
    std::vector<double> acc(size_t(cs.n * out_sp * cs.out_channels), 0.0);
    for (int64_t n = 0; n < cs.n; ++n)
        for (int64_t iv = 0; iv < in_sp; ++iv) {
            const int64_t i[3] = {iv / (in[1] * in[2]), iv / in[2] % in[1], iv % in[2]};
            for (int64_t t = 0; t < taps; ++t) {
                const int64_t kk[3] = {t / (cs.kernel[1] * cs.kernel[2]),
                                       t / cs.kernel[2] % cs.kernel[1], t % cs.kernel[2]};
                int64_t ov = 0;
                bool inside = true;
                for (int a = 0; a < 3; ++a) {
                    const int64_t o = i[a] * cs.stride[a] - cs.pad[a] + kk[a] * cs.dilation[a];
                    inside = inside && o >= 0 && o < out[a];
                    ov = ov * out[a] + o;
                }
                if (!inside) continue;
                for (int64_t ci = 0; ci < cin; ++ci) {
                    const double xv = xAt(n, iv, ci);
                    const int64_t g = ci / cig;
                    for (int64_t co = 0; co < cog; ++co)
                        acc[size_t((n * out_sp + ov) * cs.out_channels + g * cog + co)] +=
                            xv * double(w[(ci * taps + t) * cog + co]);
                }
            }
        }
    for (int64_t n = 0; n < cs.n; ++n)
        for (int64_t ov = 0; ov < out_sp; ++ov)
            for (int64_t k = 0; k < cs.out_channels; ++k)
                yAt(n, ov, k) = float(acc[size_t((n * out_sp + ov) * cs.out_channels + k)]);
}

// InstanceNorm statistics: per (image, channel) moments in double, folded with gamma/beta by the
// kernels' own normAffine into the scale/shift the next (apply) epilogue step reads.
void runInstanceNormStats(const Step& s, const Step& apply) {
    const auto* x = static_cast<const float*>(s.va.data);
    const int64_t channels = s.va.channels;
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t c = 0; c < channels; ++c) {
            double sum = 0, sq = 0;
            for (int64_t p = 0; p < s.spatial; ++p)
                sum += x[(n * s.spatial + p) * s.va.ldc + s.va.c_offset + c];
            const double mean = sum / double(s.spatial);
            for (int64_t p = 0; p < s.spatial; ++p) {
                const double d = x[(n * s.spatial + p) * s.va.ldc + s.va.c_offset + c] - mean;
                sq += d * d;
            }
            const math::Affine a = math::normAffine({float(s.spatial), float(mean), float(sq)},
                                                    s.scale_ptr ? s.scale_ptr[c] : 1.0f,
                                                    s.shift_ptr ? s.shift_ptr[c] : 0.0f, s.epsilon);
            const_cast<float*>(apply.scale_ptr)[n * channels + c] = a.scale;
            const_cast<float*>(apply.shift_ptr)[n * channels + c] = a.shift;
        }
}

// The channels-last epilogue / binary / channel-softmax steps of kernels.h, fp32 storage.
Status runConvPathStep(const Step& s) {
    auto ptr = [&](const View& v, int64_t row, int64_t c) {
        return static_cast<float*>(v.data) + row * v.ldc + v.c_offset + c;
    };
    const int64_t rows = s.n * s.spatial;
    switch (s.kind) {
        case Step::Kind::kEpilogue:
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < s.va.channels; ++c) {
                    const float res = s.vres.data ? *ptr(s.vres, r, c) : 0.0f;
                    const float alpha = s.prelu_ptr ? s.prelu_ptr[c] : s.alpha;
                    // Per (image, channel) after an InstanceNorm, else per channel.
                    const int64_t ai = s.affine_per_image ? r / s.spatial * s.va.channels + c : c;
                    *ptr(s.vy, r, c) = math::epilogue(
                        *ptr(s.va, r, c), s.scale_ptr ? s.scale_ptr[ai] : 1.0f,
                        s.shift_ptr ? s.shift_ptr[ai] : 0.0f, res, s.act, alpha, s.lo, s.hi);
                }
            return Status::ok();
        case Step::Kind::kBinary: {
            static const math::EltOp ops[] = {math::EltOp::kAdd, math::EltOp::kSub,
                                              math::EltOp::kMul, math::EltOp::kDiv};
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < s.va.channels; ++c)
                    *ptr(s.vy, r, c) = math::eltwise(ops[int(s.op)], *ptr(s.va, r, c),
                                                     *ptr(s.vb, r, c), 0, 0, 0, 0);
            return Status::ok();
        }
        case Step::Kind::kSoftmax:
            for (int64_t r = 0; r < rows; ++r) {
                float mx = -FLT_MAX;
                for (int64_t c = 0; c < s.va.channels; ++c) mx = std::max(mx, *ptr(s.va, r, c));
                double sum = 0;
                for (int64_t c = 0; c < s.va.channels; ++c) sum += std::exp(*ptr(s.va, r, c) - mx);
                for (int64_t c = 0; c < s.va.channels; ++c)
                    *ptr(s.vy, r, c) = float(std::exp(*ptr(s.va, r, c) - mx) / sum);
            }
            return Status::ok();
        default:
            return unsupported("step kind without a host replay");
    }
}

}  // namespace

Result<std::vector<engine::Tensor>> runPlanOnHost(const engine::Graph& graph,
                                                  const std::vector<engine::Tensor>& inputs,
                                                  const planning::PlanOptions& options) {
    std::vector<engine::Shape> shapes;
    for (const auto& t : inputs) shapes.push_back(t.shape());
    VOXSEG_ASSIGN_OR_RETURN(planning::PlannedGraph pg,
                            planning::planGraph(graph, shapes, StorageType::kFloat32, options));
    const std::vector<ConvShape> conv_shapes = pg.planner->conv_shapes_;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> arena(pg.arena_bytes / sizeof(float) + 1, nan);
    std::vector<uint8_t> params = pg.planner->params_;
    std::vector<float> scratch(pg.scratch_bytes / sizeof(float) + 1, nan);
    const std::vector<engine::Shape> out_shapes = [&] {
        std::vector<engine::Shape> s;
        for (engine::ValueId o : pg.shaped->outputs) s.push_back(pg.shaped->values[o].shape);
        return s;
    }();
    planning::ResolvedSteps r =
        planning::resolveSteps(pg, reinterpret_cast<uint8_t*>(arena.data()), params.data(),
                               reinterpret_cast<uint8_t*>(scratch.data()));
    // Inputs: packed as they are; channels-last rows with zeroed padding channels.
    for (size_t i = 0; i < inputs.size(); ++i) {
        const float* src = inputs[i].data<float>();
        if (r.packed_inputs[i]) {
            std::memcpy(r.packed_inputs[i], src, inputs[i].bytes());
            continue;
        }
        const View& v = r.input_views[i];
        const auto& s = shapes[i];
        const int64_t spatial = s[2] * s[3] * s[4];
        for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t p = 0; p < spatial; ++p)
                for (int64_t c = 0; c < v.ldc - v.c_offset; ++c)
                    static_cast<float*>(v.data)[(n * spatial + p) * v.ldc + v.c_offset + c] =
                        c < v.channels ? src[(n * s[1] + c) * spatial + p] : 0.0f;
    }
    for (const Step& s : r.steps) {
        if (s.kind == Step::Kind::kTensor) {
            runTensor(r.tensor_steps[size_t(s.tensor)]);
            continue;
        }
        if (s.kind == Step::Kind::kInt8Conv) {
            runInt8Conv(s, r.int8_convs[size_t(s.int8)]);
            continue;
        }
        if (s.kind == Step::Kind::kConv) {
            runConv(s, conv_shapes[size_t(s.conv)]);
            continue;
        }
        if (s.kind == Step::Kind::kInstanceNorm) {
            runInstanceNormStats(s, *(&s + 1));  // the apply step follows (as on the device)
            continue;
        }
        VOXSEG_RETURN_IF_ERROR(runConvPathStep(s));
    }
    std::vector<engine::Tensor> outputs;
    for (size_t i = 0; i < out_shapes.size(); ++i) {
        engine::Tensor t(engine::DType::kFloat32, out_shapes[i]);
        float* dst = t.data<float>();
        if (r.packed_outputs[i]) {
            std::memcpy(dst, r.packed_outputs[i], t.bytes());
        } else {
            const View& v = r.output_views[i];
            const auto& s = out_shapes[i];
            const int64_t spatial = s[2] * s[3] * s[4];
            for (int64_t n = 0; n < s[0]; ++n)
                for (int64_t p = 0; p < spatial; ++p)
                    for (int64_t c = 0; c < s[1]; ++c)
                        dst[(n * s[1] + c) * spatial + p] =
                            static_cast<float*>(v.data)[(n * spatial + p) * v.ldc + v.c_offset + c];
        }
        outputs.push_back(std::move(t));
    }
    return outputs;
}

}  // namespace voxseg::cuda::testing
