// Conv and ConvTranspose on oneDNN convolution/deconvolution primitives. Layouts are left to
// oneDNN (format_tag::any); the producer's layout is kept when the same implementation accepts
// it, so consecutive layers need no reorder. Bias, activation and a residual add (sum post-op)
// are fused; an epilogue the primitive refuses is applied by separate in-place primitives.
//
// A ConvTranspose whose kernel equals its stride (no padding, no groups: the up-sampling of
// nnU-Net and MONAI DynUNet decoders) writes one disjoint kd x kh x kw block per input voxel, so it
// is planned as a 1x1 convolution to OC * K channels (oneDNN's fastest convolution kernels) and a
// scatter of those channel groups into the blocks. oneDNN 2.6 (Debian 12) runs its deconvolution
// for this case as a strided backward convolution at about 9 GFLOP/s: 41 % of the CT demo model's
// CPU time went there. The scatter is our own kernel: oneDNN has no depth-to-space primitive.
#include "engine/cpu/conv_int8.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/quantize_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace voxseg::engine::cpu {
namespace {

// Not oneDNN's reference or gemm fallback: a layout worth keeping (or choosing) for it.
bool fastImpl(const std::string& impl) {
    return impl.find("ref") == std::string::npos && impl.find("gemm") == std::string::npos;
}

struct ConvGeometry {
    dnnl::memory::dims strides, dilations, pads_l, pads_r;
};

// oneDNN counts dilation from 0 (0 = dense).
ConvGeometry geometry(const ConvAttrs& c) {
    ConvGeometry g;
    for (size_t i = 0; i < c.kernel.size(); ++i) {
        g.strides.push_back(c.strides.empty() ? 1 : c.strides[i]);
        g.dilations.push_back((c.dilations.empty() ? 1 : c.dilations[i]) - 1);
        g.pads_l.push_back(c.pads_begin.empty() ? 0 : c.pads_begin[i]);
        g.pads_r.push_back(c.pads_end.empty() ? 0 : c.pads_end[i]);
    }
    return g;
}

// Weights of an ONNX Conv ([O, I/g, k...]) or ConvTranspose ([I, O/g, k...]) as oneDNN sees them:
// dims ([g,] O/g, I/g, k...) with the strides of the ONNX storage order.
dnnl::memory::desc onnxWeightsDesc(const Shape& w, int64_t groups, bool transposed) {
    const size_t sp = w.size() - 2;
    int64_t k = 1;
    for (size_t i = 0; i < sp; ++i) k *= w[2 + i];
    dnnl::memory::dims dims, strides;
    int64_t oc, ic;  // per group
    if (!transposed) {
        oc = w[0] / groups;
        ic = w[1];
    } else {
        ic = w[0] / groups;
        oc = w[1];
    }
    if (groups > 1) {
        dims.push_back(groups);
        strides.push_back(oc * ic * k);
    }
    dims.push_back(oc);
    dims.push_back(ic);
    if (!transposed) {
        strides.push_back(ic * k);
        strides.push_back(k);
    } else {
        strides.push_back(k);
        strides.push_back(oc * k);
    }
    int64_t s = k;
    for (size_t i = 0; i < sp; ++i) {
        s /= w[2 + i];
        dims.push_back(w[2 + i]);
        strides.push_back(s);
    }
    return dnnl::memory::desc(dims, dt::f32, strides);
}

dnnl::memory::desc anyLike(const dnnl::memory::dims& dims, dt type) {
    return dnnl::memory::desc(dims, type, tag::any);
}

// The type a convolution computes in: the plan's, except that a bf16 plan keeps a 3-D
// convolution of at most 4 input channels (a network's first, on the image) in fp32. oneDNN 2.6's
// AMX bf16 kernel pads the input channels to 32, so one channel costs as much as 32: on the
// plain nnU-Net's 1 -> 32, 3x3x3 first convolution at 128^3 (AMX Xeon, 2 threads) brgconv bf16
// took 0.088 s and the fp32 jit kernel 0.022 s. Its fp32 result is also the more exact one.
dt convComputeType(const Plan& plan, const Shape& xs, bool transposed) {
    const dt act = plan.actType();
    if (act == dt::bf16 && !transposed && xs.size() == 5 && xs[1] <= 4) return dt::f32;
    return act;
}

// Post-ops for the node's epilogue: sum (residual) first, then the activation. PReLU is not
// fused (returns false for `fused_act`).
dnnl::primitive_attr epilogueAttr(const Node& n, bool with_epilogue, bool& fused_act) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    fused_act = false;
    if (!with_epilogue) return attr;
    dnnl::post_ops ops;
    if (n.fused_residual >= 0) ops.append_sum(1.0f);
    dnnl::algorithm alg;
    float a = 0, b = 0;
    if (eltwiseFor(n.fused_activation, n.fused_alpha, alg, a, b)) {
        ops.append_eltwise(1.0f, alg, a, b);
        fused_act = true;
    }
    attr.set_post_ops(ops);
    return attr;
}

template <typename Prim, typename MakeDesc>
Status planConvLike(Plan& plan, bool transposed, MakeDesc make_desc) {
    using Pd = typename Prim::primitive_desc;
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0], w = n.inputs[1];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : -1;
    if (!g.isConstant(w)) return nodeError(plan, "weights must be a constant initializer");
    if (b >= 0 && !g.isConstant(b)) return nodeError(plan, "bias must be a constant initializer");
    const Shape& ws = g.values[w].shape;
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    const dnnl::memory::desc w_onnx = onnxWeightsDesc(ws, n.conv.group, transposed);
    const dt act = convComputeType(plan, xs, transposed);
    const auto src_any = anyLike(toDims(xs), act);
    const auto w_any = anyLike(w_onnx.dims(), act);
    const auto dst_any = anyLike(toDims(ys), act);
    const auto bias_md =
        b >= 0 ? dnnl::memory::desc({ys[1]}, dt::f32, tag::a) : dnnl::memory::desc();
    ConvGeometry geo = geometry(n.conv);
    if (transposed) {
        // Right padding from the inferred output size (covers output_padding).
        for (size_t i = 0; i < geo.pads_r.size(); ++i) {
            const int64_t k = (n.conv.kernel[i] - 1) * (geo.dilations[i] + 1) + 1;
            geo.pads_r[i] = (xs[2 + i] - 1) * geo.strides[i] + k - ys[2 + i] - geo.pads_l[i];
        }
    }
    const bool has_epilogue = n.fused_residual >= 0 || n.fused_activation != ActivationKind::kNone;

    // Build with the epilogue fused when oneDNN accepts it; prefer the producer's layout.
    auto build = [&](const dnnl::memory::desc& src_md, const dnnl::memory::desc& dst_md, bool fuse,
                     bool& fused_act) {
        const auto attr = epilogueAttr(n, fuse, fused_act);
        return Pd(make_desc(src_md, w_any, bias_md, dst_md, geo), attr, plan.engine());
    };
    bool fused = has_epilogue, fused_act = false;
    Pd pd;
    try {
        pd = build(src_any, dst_any, fused, fused_act);
    } catch (const dnnl::error&) {
        fused = false;
        try {
            pd = build(src_any, dst_any, false, fused_act);
        } catch (const dnnl::error& e) {
            return nodeError(plan, std::string("oneDNN has no implementation: ") + e.what());
        }
    }
    if (!g.isConstant(x) && plan.has(x) && plan.desc(x).data_type() == act) {
        // A reorder per layer costs a memory pass: keep the producer's layout (for src and dst)
        // unless only a reference or gemm fallback takes it.
        const auto& prev = plan.desc(x);
        const auto same_dst = sameLayout(prev, toDims(ys), act);
        const bool src_ok = pd.src_desc() == prev, dst_ok = pd.dst_desc() == same_dst;
        for (const auto& dst_try : {same_dst, dst_any}) {
            if (src_ok && (dst_ok || &dst_try == &dst_any)) break;
            try {
                bool fa2 = false;
                Pd keep = build(prev, dst_try, fused, fa2);
                const std::string impl = keep.impl_info_str();
                if (impl == pd.impl_info_str() || fastImpl(impl)) {
                    pd = keep;
                    fused_act = fa2;
                    break;
                }
            } catch (const dnnl::error&) {
            }
        }
    }

    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, pd.src_desc()));
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory wm,
                            plan.constantMemory(g.constant(w), w_onnx, pd.weights_desc()));
    std::vector<std::pair<int, MemRef>> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, MemRef{-1, pd.weights_desc(), wm}}};
    if (b >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory bm, plan.constantMemory(b, pd.bias_desc()));
        args.push_back({DNNL_ARG_BIAS, MemRef{-1, pd.bias_desc(), bm}});
    }
    const auto dst_md = pd.dst_desc();
    MemRef dst;
    if (fused && n.fused_residual >= 0) {
        // The sum post-op accumulates into dst: start from the residual, in place if it dies here.
        std::optional<MemRef> in_place;
        if (n.fused_residual != x) in_place = plan.tryInPlace(n.fused_residual, dst_md);
        if (in_place) {
            dst = *in_place;
        } else {
            dst = plan.newBuffer(dst_md);
            VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, dst_md));
            VOXSEG_RETURN_IF_ERROR(plan.addCopy(r, dst));
        }
    } else {
        dst = plan.newBuffer(dst_md);
    }
    args.push_back({DNNL_ARG_DST, dst});
    const char* kind = transposed ? "deconv " : "conv ";
    plan.addPrimitive(
        kind + std::string(pd.impl_info_str()) + " " + descName(src.md) + "->" + descName(dst_md),
        Prim(pd), std::move(args), pd.scratchpad_desc());
    plan.define(n.outputs[0], dst);
    if (!fused) return planUnfusedEpilogue(plan, dst, true, true);
    // The residual was fused but the activation (PReLU) has no eltwise post-op.
    if (!fused_act && n.fused_activation != ActivationKind::kNone)
        return planUnfusedEpilogue(plan, dst, false, true);
    return Status::ok();
}

// Kernel == stride, zero padding, dilation 1, group 1, output = input * stride.
bool isSubpixelTranspose(const Node& n, const Shape& xs, const Shape& ys) {
    const ConvAttrs& c = n.conv;
    const size_t sr = c.kernel.size();
    if (c.group != 1 || sr < 2 || sr > 3 || xs.size() != sr + 2 || ys.size() != sr + 2)
        return false;
    for (size_t i = 0; i < sr; ++i) {
        const int64_t stride = c.strides.empty() ? 1 : c.strides[i];
        if (stride != c.kernel[i] || (!c.dilations.empty() && c.dilations[i] != 1) ||
            (!c.pads_begin.empty() && c.pads_begin[i] != 0) ||
            (!c.pads_end.empty() && c.pads_end[i] != 0) || ys[2 + i] != xs[2 + i] * c.kernel[i])
            return false;
    }
    return true;
}

// dst block (n, cb, od, oh, ow) <- tmp block (n, kidx * oc_blocks + cb, od / kd, oh / kh, ow / kw)
// with kidx = ((od % kd) * kh + oh % kh) * kw + ow % kw; blocks of kBytes (channel block B times
// the element size), layouts nC[d]hwBc (B = 1: plain nc[d]hw).
template <size_t kBytes>
Kernel subpixelScatter(std::array<int64_t, 3> in, std::array<int64_t, 3> k, int64_t batch,
                       int64_t oc_blocks) {
    return [=](const std::vector<dnnl::memory>& m) {
        const auto* src = static_cast<const std::byte*>(m[0].get_data_handle());
        auto* dst = static_cast<std::byte*>(m[1].get_data_handle());
        const int64_t od_n = in[0] * k[0], oh_n = in[1] * k[1], ow_n = in[2] * k[2];
        const int64_t kk = k[0] * k[1] * k[2];
        const int64_t rows = batch * oc_blocks * od_n * oh_n;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t oh = r % oh_n, od = (r / oh_n) % od_n, ncb = r / (oh_n * od_n);
            const int64_t cb = ncb % oc_blocks, n = ncb / oc_blocks;
            const int64_t d = od / k[0], h = oh / k[1];
            const int64_t kidx_dh = ((od % k[0]) * k[1] + oh % k[1]) * k[2];
            std::byte* out = dst + r * ow_n * kBytes;
            for (int64_t ow = 0; ow < ow_n; ++ow) {
                const int64_t kidx = kidx_dh + ow % k[2];
                const int64_t plane = (n * kk + kidx) * oc_blocks + cb;
                const int64_t at = ((plane * in[0] + d) * in[1] + h) * in[2] + ow / k[2];
                std::memcpy(out + ow * kBytes, src + at * kBytes, kBytes);
            }
        }
    };
}

// The same with tmp and dst channels-last (the bf16 case of output channels that are a multiple
// of 8 but not of 16: oneDNN 2.6 has no bf16 kernel for 8-blocked layouts, only its reference
// one, 1.07 of 1.9 s of a bf16 Primus-S patch): dst voxel (n, od, oh, ow) <- the kidx-th run of
// `group` values (OC) of tmp voxel (n, od / kd, oh / kh, ow / kw), `run(out, in)` moving one run
// from `in` (tmp, runs of src_bytes) to `out`. With `dst_step` (bytes from one dst voxel to the
// next; 0: `dst_bytes`) and `dst_offset` (bytes), the runs land in a wider channels-last tensor:
// the up-sampling's channels of its concat; with `halo`, in its interior.
template <typename Run>
Kernel subpixelChannelsLast(std::array<int64_t, 3> in, std::array<int64_t, 3> k, int64_t batch,
                            size_t src_bytes, size_t dst_bytes, size_t dst_step, size_t dst_offset,
                            const std::optional<U8Halo>& halo, Run run) {
    if (dst_step == 0) dst_step = dst_bytes;
    std::array<int64_t, 3> padded{in[0] * k[0], in[1] * k[1], in[2] * k[2]}, lo{};
    if (halo) padded = halo->padded, lo = halo->lo;
    return [=](const std::vector<dnnl::memory>& m) {
        const auto* src = static_cast<const std::byte*>(m[0].get_data_handle());
        auto* dst = static_cast<std::byte*>(m[1].get_data_handle());
        const int64_t od_n = in[0] * k[0], oh_n = in[1] * k[1], ow_n = in[2] * k[2];
        const size_t voxel = src_bytes * static_cast<size_t>(k[0] * k[1] * k[2]);
        const int64_t rows = batch * od_n * oh_n;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t oh = r % oh_n, od = (r / oh_n) % od_n, n = r / (oh_n * od_n);
            const int64_t kidx_dh = ((od % k[0]) * k[1] + oh % k[1]) * k[2];
            const std::byte* row =
                src +
                static_cast<size_t>(((n * in[0] + od / k[0]) * in[1] + oh / k[1]) * in[2]) * voxel;
            const int64_t out_voxel =
                ((n * padded[0] + od + lo[0]) * padded[1] + oh + lo[1]) * padded[2] + lo[2];
            std::byte* out = dst + dst_offset + static_cast<size_t>(out_voxel) * dst_step;
            for (int64_t ow = 0; ow < ow_n; ++ow)
                run(out + static_cast<size_t>(ow) * dst_step,
                    row + static_cast<size_t>(ow / k[2]) * voxel +
                        static_cast<size_t>(kidx_dh + ow % k[2]) * src_bytes);
        }
    };
}

// Runs of `group` bytes copied.
Kernel subpixelScatterChannelsLast(std::array<int64_t, 3> in, std::array<int64_t, 3> k,
                                   int64_t batch, size_t group, size_t dst_step = 0,
                                   size_t dst_offset = 0,
                                   const std::optional<U8Halo>& halo = std::nullopt) {
    return subpixelChannelsLast(
        in, k, batch, group, group, dst_step, dst_offset, halo,
        [group](std::byte* out, const std::byte* from) { std::memcpy(out, from, group); });
}

// Runs of `oc` float32 or bf16 (T uint16_t) values quantised to u8 with `q` (quantize_run.h):
// the float up-sampling written into its concat's u8.
template <typename T>
Kernel subpixelQuantizeChannelsLast(std::array<int64_t, 3> in, std::array<int64_t, 3> k,
                                    int64_t batch, int64_t oc, size_t dst_step, size_t dst_offset,
                                    const std::optional<U8Halo>& halo,
                                    const quant::ActivationQuant& q) {
    const float inv = 1.0f / q.scale, zp = static_cast<float>(q.zero_point);
    return subpixelChannelsLast(in, k, batch, static_cast<size_t>(oc) * sizeof(T),
                                static_cast<size_t>(oc), dst_step, dst_offset, halo,
                                [oc, inv, zp](std::byte* out, const std::byte* from) {
                                    quantizeRun(reinterpret_cast<const T*>(from),
                                                reinterpret_cast<uint8_t*>(out), oc, inv, zp);
                                });
}

// The same for output channels that are no multiple of 8 (a segmentation head's up-sampling to
// 2 classes): the 1x1 convolution writes channels-last (one voxel's K * OC values together, the
// layout oneDNN's fast AVX-512 1x1 kernels write and the producer's ndhwc needs no reorder;
// blocked by 1, plain ncdhw, got gemm at a fraction of the rate), or 8-channel blocks of those
// K * OC (CPUs without AVX-512, whose channels-last 1x1 convolution is oneDNN's reference one),
// gathered here into the plain nc[d]hw output: dst (n, o, od, oh, ow) <- tmp (n, kidx * oc + o,
// d, h, w), `tmp_block` 0 for channels-last tmp, else its channel block.
template <typename T>
Kernel subpixelGather(std::array<int64_t, 3> in, std::array<int64_t, 3> k, int64_t batch,
                      int64_t oc, int64_t tmp_block) {
    return [=](const std::vector<dnnl::memory>& m) {
        const T* src = static_cast<const T*>(m[0].get_data_handle());
        T* dst = static_cast<T*>(m[1].get_data_handle());
        const int64_t od_n = in[0] * k[0], oh_n = in[1] * k[1], ow_n = in[2] * k[2];
        const int64_t channels = k[0] * k[1] * k[2] * oc, spatial = in[0] * in[1] * in[2];
        // tmp element (n, c) at spatial offset 0; + s * step for the voxel s
        const int64_t step = tmp_block ? tmp_block : channels;
        auto base = [=](int64_t n, int64_t c) {
            return tmp_block
                       ? ((n * (channels / tmp_block) + c / tmp_block) * spatial) * tmp_block +
                             c % tmp_block
                       : n * spatial * channels + c;
        };
        const int64_t rows = batch * oc * od_n * oh_n;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t oh = r % oh_n, od = (r / oh_n) % od_n, no = r / (oh_n * od_n);
            const int64_t o = no % oc, n = no / oc;
            const int64_t s0 = ((od / k[0]) * in[1] + oh / k[1]) * in[2];
            const int64_t kidx_dh = ((od % k[0]) * k[1] + oh % k[1]) * k[2];
            T* out = dst + r * ow_n;
            for (int64_t ow = 0; ow < ow_n; ++ow)
                out[ow] = src[base(n, (kidx_dh + ow % k[2]) * oc + o) + (s0 + ow / k[2]) * step];
        }
    };
}

// ONNX ConvTranspose weights [IC, OC, k...] as the 1x1 convolution's [K * OC, IC] (channel
// kidx * OC + oc), and its bias repeated per kernel offset.
std::vector<float> subpixelWeights(const std::vector<float>& w, int64_t ic, int64_t oc,
                                   int64_t kk) {
    std::vector<float> w1(w.size());
    for (int64_t i = 0; i < ic; ++i)
        for (int64_t o = 0; o < oc; ++o)
            for (int64_t kidx = 0; kidx < kk; ++kidx)
                w1[static_cast<size_t>((kidx * oc + o) * ic + i)] =
                    w[static_cast<size_t>((i * oc + o) * kk + kidx)];
    return w1;
}

std::vector<float> subpixelBias(const std::vector<float>& b, int64_t kk) {
    std::vector<float> b1;
    for (int64_t kidx = 0; kidx < kk; ++kidx) b1.insert(b1.end(), b.begin(), b.end());
    return b1;
}

// int8 plans (int8_policy.h, concat_u8): the 1x1 convolution's channels-last result `tmp`
// ([N, in..., K * OC], float32 or bf16) quantised straight into this ConvTranspose's channels of
// the quantising concat's u8 output (or its halo's interior) by the scatter, with the concat's
// parameters (subpixelQuantizeChannelsLast). The concat then writes its other inputs into the
// same buffer (planConcat, concatInPlace), and the up-sampled float tensor is never written or
// read. The values are those of the concat's own quantising reorder, bit for bit
// (quantize_run.h; Int8Graph.UpsamplingIntoTheConcatChangesNoValue). False (nothing planned)
// where the concat is not along the channels.
bool planQuantizingScatter(Plan& plan, const MemRef& tmp, std::array<int64_t, 3> in,
                           std::array<int64_t, 3> k, size_t sr) {
    const quant::Int8Layer* q8 = plan.int8Layer();
    if (!q8 || !q8->concat_u8) return false;
    const ValueId y = plan.node().outputs[0];
    std::optional<ConcatTarget> target = concatInPlaceTarget(plan, y, sr);
    if (!target) return false;
    const Shape& ys = plan.graph().values[y].shape;
    const MemRef cat = useConcatInPlace(plan, y, *target);
    const auto ct = static_cast<size_t>(target->channels), c0 = static_cast<size_t>(target->c0);
    plan.addKernel(
        "deconv k=s: scatter into concat u8 " + descName(tmp.md) + "->" + descName(cat.md),
        tmp.md.data_type() == dt::bf16
            ? subpixelQuantizeChannelsLast<uint16_t>(in, k, ys[0], ys[1], ct, c0, target->halo,
                                                     q8->concat_dst)
            : subpixelQuantizeChannelsLast<float>(in, k, ys[0], ys[1], ct, c0, target->halo,
                                                  q8->concat_dst),
        {tmp, cat});
    return true;
}

Status planSubpixelConvTranspose(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0], w = n.inputs[1];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : -1;
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    const size_t sr = n.conv.kernel.size();
    const int64_t ic = xs[1], oc = ys[1];
    int64_t kk = 1;
    for (int64_t k : n.conv.kernel) kk *= k;
    const dt act = plan.actType();

    const std::vector<float> w1 = subpixelWeights(g.constant(w).toFloats(), ic, oc, kk);
    Shape w1_shape{kk * oc, ic};
    w1_shape.insert(w1_shape.end(), sr, 1);
    dnnl::memory::dims tmp_dims{xs[0], kk * oc};
    tmp_dims.insert(tmp_dims.end(), xs.begin() + 2, xs.end());
    const dnnl::memory::dims ones(sr, 1), zeros(sr, 0);
    const auto bias_md =
        b >= 0 ? dnnl::memory::desc({kk * oc}, dt::f32, tag::a) : dnnl::memory::desc();
    const tag channels_last = sr == 3 ? tag::ndhwc : tag::nhwc;
    bool unused = false;
    const auto attr = epilogueAttr(n, false, unused);
    auto build = [&](const dnnl::memory::desc& src_md, const dnnl::memory::desc& tmp_md) {
        return dnnl::convolution_forward::primitive_desc(
            dnnl::convolution_forward::desc(
                dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
                anyLike(toDims(w1_shape), act), bias_md, tmp_md, ones, zeros, zeros),
            attr, plan.engine());
    };
    auto blockedTag = [&](int64_t b) {
        return sr == 3 ? (b == 16 ? tag::nCdhw16c : tag::nCdhw8c)
                       : (b == 16 ? tag::nChw16c : tag::nChw8c);
    };
    // tmp blocked like the output (the scatter moves whole channel blocks): 16-channel blocks,
    // else 8 (CPUs without AVX-512, where oneDNN's 1x1 kernels write only 8-channel blocks and a
    // 16-channel tmp got its reference convolution: 2.5 s of a 5.9 s Primus-S patch), else
    // channels-last (bf16 with 8-channel blocks, channel counts no multiple of 8). The first
    // candidate that builds, replaced by a later one only if that one is fast. `block` is the
    // output's channel block: 0 channels-last, 1 plain (gathered from a tmp whose channel block
    // is `tmp_block`, 0 for channels-last).
    struct Candidate {
        tag tmp;
        int64_t block, tmp_block;
    };
    std::vector<Candidate> candidates;
    // A channels-last producer (AMX's bf16 and int8 convolutions write ndhwc) keeps
    // channels-last: no reorder before, none at the decoder's concat after, and AMX's 1x1 kernel
    // (brgconv_1x1) rather than AVX-512's on 16-channel blocks.
    if (oc % 8 == 0 && plan.has(x) &&
        plan.desc(x) == dnnl::memory::desc(toDims(xs), plan.desc(x).data_type(), channels_last))
        candidates.push_back({channels_last, 0, 0});
    if (oc % 16 == 0) candidates.push_back({blockedTag(16), 16, 0});
    if (oc % 8 == 0) candidates.push_back({blockedTag(8), 8, 0});
    candidates.push_back({channels_last, oc % 8 == 0 ? 0 : 1, 0});
    if (oc % 8 != 0 && kk * oc % 8 == 0) candidates.push_back({blockedTag(8), 1, 8});
    dnnl::memory::desc tmp_md;
    dnnl::convolution_forward::primitive_desc pd;
    int64_t block = 1, tmp_block = 0;
    bool built = false;
    for (const auto& [t, candidate_block, candidate_tmp_block] : candidates) {
        if (built && fastImpl(pd.impl_info_str())) break;
        const auto md = dnnl::memory::desc(tmp_dims, act, t);
        try {
            auto p = build(anyLike(toDims(xs), act), md);
            if (!g.isConstant(x) && plan.has(x) && plan.desc(x).data_type() == act &&
                p.src_desc() != plan.desc(x)) {
                try {  // the producer's layout, unless only a slow implementation takes it
                    auto keep = build(plan.desc(x), md);
                    if (fastImpl(keep.impl_info_str())) p = keep;
                } catch (const dnnl::error&) {
                }
            }
            if (!built || fastImpl(p.impl_info_str())) {
                pd = p;
                tmp_md = md;
                block = candidate_block;
                tmp_block = candidate_tmp_block;
                built = true;
            }
        } catch (const dnnl::error&) {
        }
    }
    if (!built) return planConvTranspose(plan, /*subpixel=*/false);
    const tag layout = block == 0   ? channels_last
                       : block == 1 ? (sr == 3 ? tag::ncdhw : tag::nchw)
                                    : blockedTag(block);
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, pd.src_desc()));
    VOXSEG_ASSIGN_OR_RETURN(dnnl::memory wm,
                            plan.constantMemory(Tensor::fromFloats(w1_shape, w1),
                                                plainDesc(w1_shape, dt::f32), pd.weights_desc()));
    std::vector<std::pair<int, MemRef>> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, MemRef{-1, pd.weights_desc(), wm}}};
    if (b >= 0) {
        const std::vector<float> b1 = subpixelBias(g.constant(b).toFloats(), kk);
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory bm,
                                plan.constantMemory(Tensor::fromFloats({kk * oc}, b1),
                                                    plainDesc({kk * oc}, dt::f32), pd.bias_desc()));
        args.push_back({DNNL_ARG_BIAS, MemRef{-1, pd.bias_desc(), bm}});
    }
    const MemRef tmp = plan.newBuffer(tmp_md);
    args.push_back({DNNL_ARG_DST, tmp});
    plan.addPrimitive("deconv k=s: conv1x1 " + std::string(pd.impl_info_str()) + " " +
                          descName(src.md) + "->" + descName(tmp_md),
                      dnnl::convolution_forward(pd), std::move(args), pd.scratchpad_desc());

    std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1};
    for (size_t i = 0; i < sr; ++i) {
        in[3 - sr + i] = xs[2 + i];
        k[3 - sr + i] = n.conv.kernel[i];
    }
    if (block == 0 && planQuantizingScatter(plan, tmp, in, k, sr)) return Status::ok();
    const MemRef dst = plan.newBuffer(dnnl::memory::desc(toDims(ys), act, layout));
    const size_t elem = act == dt::bf16 ? 2 : 4;
    const size_t bytes = static_cast<size_t>(block) * elem;
    const int64_t oc_blocks = block > 0 ? oc / block : 1;
    Kernel scatter;
    switch (block > 1 ? bytes : static_cast<size_t>(block)) {
        case 0:
            scatter = subpixelScatterChannelsLast(in, k, xs[0], static_cast<size_t>(oc) * elem);
            break;
        case 1:
            scatter = act == dt::bf16 ? subpixelGather<uint16_t>(in, k, xs[0], oc, tmp_block)
                                      : subpixelGather<uint32_t>(in, k, xs[0], oc, tmp_block);
            break;
        case 64:
            scatter = subpixelScatter<64>(in, k, xs[0], oc_blocks);
            break;
        case 32:
            scatter = subpixelScatter<32>(in, k, xs[0], oc_blocks);
            break;
        case 16:
            scatter = subpixelScatter<16>(in, k, xs[0], oc_blocks);
            break;
        case 4:
            scatter = subpixelScatter<4>(in, k, xs[0], oc_blocks);
            break;
        default:
            scatter = subpixelScatter<2>(in, k, xs[0], oc_blocks);
            break;
    }
    plan.addKernel("deconv k=s: scatter " + descName(tmp_md) + "->" + descName(dst.md),
                   std::move(scatter), {tmp, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst, true, true);
}

}  // namespace

Status planConv(Plan& plan) {
    if (pairedConvApplies(plan)) return planPairedConv(plan);
    return planConvLike<dnnl::convolution_forward>(
        plan, false,
        [](const dnnl::memory::desc& s, const dnnl::memory::desc& w, const dnnl::memory::desc& b,
           const dnnl::memory::desc& d, const ConvGeometry& geo) {
            return dnnl::convolution_forward::desc(
                dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, s, w, b, d,
                geo.strides, geo.dilations, geo.pads_l, geo.pads_r);
        });
}

Status planConvTranspose(Plan& plan, bool subpixel) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    if (subpixel && n.inputs.size() >= 2 && g.isConstant(n.inputs[1]) &&
        (n.inputs.size() < 3 || g.isConstant(n.inputs[2])) &&
        isSubpixelTranspose(n, g.values[n.inputs[0]].shape, g.values[n.outputs[0]].shape))
        return planSubpixelConvTranspose(plan);
    return planConvLike<dnnl::deconvolution_forward>(
        plan, true,
        [](const dnnl::memory::desc& s, const dnnl::memory::desc& w, const dnnl::memory::desc& b,
           const dnnl::memory::desc& d, const ConvGeometry& geo) {
            return dnnl::deconvolution_forward::desc(
                dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, s, w, b,
                d, geo.strides, geo.dilations, geo.pads_l, geo.pads_r);
        });
}

// int8 up-sampling (int8_policy.h, int8_upsample): the k = s ConvTranspose as an int8 1x1
// convolution to K * OC channels (weights per output channel, the source as the u8 its producer
// wrote), requantised with the concat's parameters into a channels-last u8 `tmp`, whose runs of
// OC bytes the scatter copies into this input's channels of the concat. Against the float
// up-sampling and its quantising scatter: the convolution multiplies bytes (VNNI/AMX) and writes
// half the bytes of a bf16 tmp, and the scatter copies bytes instead of quantising bf16. Where
// the concat cannot take it in place, the convolution writes float (dequantised) and the float
// scatter follows.
Status planInt8Upsampling(Plan& plan, const quant::Int8Layer& layer, int weight_qmax) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : -1;
    if (!plan.has(x)) return nodeError(plan, "int8: its input is not computed before it");
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[y].shape;
    const int64_t ic = xs[1], oc = ys[1];
    const std::array<int64_t, 3> in{xs[2], xs[3], xs[4]};
    const std::array<int64_t, 3> k{n.conv.kernel[0], n.conv.kernel[1], n.conv.kernel[2]};
    const int64_t kk = k[0] * k[1] * k[2];

    quant::Int8ConvSpec spec;  // kernel 1, strides 1, no padding
    spec.batch = xs[0];
    spec.in_channels = ic;
    spec.out_channels = kk * oc;
    spec.in_size = in;
    spec.dst_channels_last = true;
    const quant::Int8Weights w = quant::quantizeWeightsPerChannel(
        subpixelWeights(g.constant(n.inputs[1]).toFloats(), ic, oc, kk), kk * oc, weight_qmax);
    const std::vector<float> bias =
        b >= 0 ? subpixelBias(g.constant(b).toFloats(), kk) : std::vector<float>{};
    std::optional<ConcatTarget> target =
        layer.concat_u8 ? concatInPlaceTarget(plan, y, 3) : std::nullopt;
    spec.dst_f32 = !target;
    spec.dst_bf16 = spec.dst_f32 && plan.actType() == dt::bf16;
    quant::setRequantisation(spec, layer.src, w.scales,
                             target ? layer.concat_dst : quant::ActivationQuant{1.0f, 0}, bias);
    auto conv = Int8Conv::create(plan.engine(), spec, w, plan.quantizedDesc(x));
    if (!conv.isOk()) return nodeError(plan, conv.status().message());
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensureQuantized(x, conv->srcDesc(), layer.src));
    const MemRef tmp = plan.newBuffer(conv->dstDesc());
    addInt8ConvStep(plan, *conv, src, tmp,
                    "deconv k=s: conv1x1 int8 " + conv->implementation() + " " + descName(src.md) +
                        "->" + descName(tmp.md));
    if (target) {
        const MemRef cat = useConcatInPlace(plan, y, *target);
        plan.addKernel(
            "deconv k=s: scatter into concat u8 " + descName(tmp.md) + "->" + descName(cat.md),
            subpixelScatterChannelsLast(in, k, xs[0], static_cast<size_t>(oc),
                                        static_cast<size_t>(target->channels),
                                        static_cast<size_t>(target->c0), target->halo),
            {tmp, cat});
        return Status::ok();
    }
    const size_t elem = spec.dst_bf16 ? 2 : 4;
    const MemRef dst = plan.newBuffer(dnnl::memory::desc(toDims(ys), plan.actType(), tag::ndhwc));
    plan.addKernel("deconv k=s: scatter " + descName(tmp.md) + "->" + descName(dst.md),
                   subpixelScatterChannelsLast(in, k, xs[0], static_cast<size_t>(oc) * elem),
                   {tmp, dst});
    plan.define(y, dst);
    return Status::ok();
}

}  // namespace voxseg::engine::cpu
