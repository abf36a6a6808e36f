// A Conv of the graph as an int8 convolution in the cpu backend's plan (docs/int8.md): weights
// quantised per output channel at compile time, the source quantised to u8 by a reorder (or read
// as the u8 an int8 producer wrote), the oneDNN int8 convolution (engine/cpu/conv_int8.h) with
// bias, residual add and ReLU/LeakyReLU in its epilogue, writing u8 for an int8 consumer, s8 per
// channel for a normalisation that takes 8-bit inputs, or float32 for the rest. Which Convs run
// here: engine/quant/int8_policy.h.
#include "engine/cpu/conv_int8.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/quantize_run.h"

#include <cstring>
#include <optional>

namespace voxseg::engine::cpu {
namespace {

// The destination: a new buffer, or (residual add) one holding the residual on entry.
Result<MemRef> destination(Plan& plan, const Node& n, const dnnl::memory::desc& dst_md) {
    if (n.fused_residual < 0) return plan.newBuffer(dst_md);
    if (n.fused_residual != n.inputs[0])
        if (auto in_place = plan.tryInPlace(n.fused_residual, dst_md)) return *in_place;
    MemRef dst = plan.newBuffer(dst_md);
    VOXSEG_ASSIGN_OR_RETURN(MemRef r, plan.ensure(n.fused_residual, dst_md));
    VOXSEG_RETURN_IF_ERROR(plan.addCopy(r, dst));
    return dst;
}

// Halo sources (int8_policy.h): the producer wrote the source inside a halo of its zero point
// (a u8 of the padded size): the convolution then runs unpadded on it without a source zero point
// (quant::foldSourceZeroPointIntoHalo), on AMX oneDNN's brgconv instead of the zero-point jit
// kernel. True when `spec` was changed so.
bool useHaloSource(quant::Int8ConvSpec& spec, const quant::Int8Weights& w,
                   const dnnl::memory::desc& produced) {
    if (produced == dnnl::memory::desc() || produced.dims().size() != 5) return false;
    for (int i = 0; i < 3; ++i)
        if (produced.dims()[2 + i] != spec.in_size[i] + spec.pads_begin[i] + spec.pads_end[i])
            return false;
    return quant::foldSourceZeroPointIntoHalo(spec, w);
}

// Tap channels (int8_policy.h): the Conv as a 1x1 convolution over a u8 tensor of
// tapChannels(spec) channels per output voxel, in_channels x kd x kh rows of 4 taps along W (a
// 3-wide kernel row's fourth weight is 0). Every tap reads a real value (the zero point where the
// padded convolution reads padding), so the zero point folds into the bias exactly as for a halo
// source: the same accumulators.
struct TapChannels {
    quant::Int8ConvSpec spec;  // the 1x1 convolution's
    quant::Int8Weights w;
    quant::ActivationQuant src;  // the source's quantisation (spec.src has no zero point left)
    int64_t in_channels = 0;     // the source's
    std::array<int64_t, 3> kernel{}, lo{};
    dnnl::memory::desc md;  // the tap tensor, channels-last u8
};
TapChannels tapChannelsOf(const quant::Int8ConvSpec& spec, const quant::Int8Weights& w) {
    TapChannels t{spec, {}, spec.src, spec.in_channels, spec.kernel, spec.pads_begin, {}};
    const int64_t k = quant::tapChannels(spec), oc = spec.out_channels;
    const int64_t rows = spec.in_channels * spec.kernel[0] * spec.kernel[1], kw = spec.kernel[2];
    t.w = {std::vector<int8_t>(static_cast<size_t>(oc * k), 0), w.scales};
    for (int64_t o = 0; o < oc; ++o)
        for (int64_t row = 0; row < rows; ++row)
            for (int64_t i = 0; i < kw; ++i)
                t.w.values[static_cast<size_t>(o * k + row * 4 + i)] =
                    w.values[static_cast<size_t>((o * rows + row) * kw + i)];
    quant::foldSourceZeroPointIntoBias(t.spec, t.w);
    t.spec.in_channels = k;
    t.spec.kernel = {1, 1, 1};
    t.spec.pads_begin = t.spec.pads_end = {};
    const auto& n = spec.in_size;
    t.md = dnnl::memory::desc({spec.batch, k, n[0], n[1], n[2]}, dt::u8,
                              dnnl::memory::format_tag::ndhwc);
    return t;
}

// The step that writes the tap tensor of `x` (float): x quantised once into a u8 volume per
// channel whose halo (U8Halo, one channel per batch item and input channel) holds its zero point,
// then each voxel's kernel rows copied as 4 bytes.
MemRef planTapStep(Plan& plan, const MemRef& x, const TapChannels& t) {
    const int64_t k = t.spec.in_channels, n_b = t.spec.batch, ic = t.in_channels;
    const std::array<int64_t, 3> size = t.spec.in_size, kernel = t.kernel, lo = t.lo;
    U8Halo halo;
    halo.batch = n_b * ic;
    halo.channels = 1;
    halo.size = size;
    halo.padded = {size[0] + kernel[0] - 1, size[1] + kernel[1] - 1, size[2] + 3};
    halo.lo = lo;
    halo.zero_point = static_cast<uint8_t>(t.src.zero_point);
    const std::array<int64_t, 3> padded = halo.padded;
    const MemRef vol = plan.newBuffer(dnnl::memory::desc(
        {n_b * ic * padded[0] * padded[1] * padded[2]}, dt::u8, dnnl::memory::format_tag::a));
    const MemRef taps = plan.newBuffer(t.md);
    const float inv = 1.0f / t.src.scale, zp = static_cast<float>(t.src.zero_point);
    auto kernel_fn = [=](const std::vector<dnnl::memory>& m) {
        const auto* xf = static_cast<const float*>(m[0].get_data_handle());
        auto* p = static_cast<uint8_t*>(m[1].get_data_handle());
        auto* out = static_cast<uint8_t*>(m[2].get_data_handle());
        const int64_t plane = padded[1] * padded[2], volume = padded[0] * plane;
        halo.fill(p);
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n_b * ic * size[0] * size[1]; ++r) {
            const int64_t h = r % size[1], d = (r / size[1]) % size[0],
                          nc = r / (size[0] * size[1]);
            quantizeRun(xf + r * size[2],
                        p + nc * volume + (d + lo[0]) * plane + (h + lo[1]) * padded[2] + lo[2],
                        size[2], inv, zp);
        }
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n_b * size[0] * size[1]; ++r) {
            const int64_t h = r % size[1], d = (r / size[1]) % size[0], n = r / (size[0] * size[1]);
            const uint8_t* rows[24];  // k / 4 <= 24 kernel rows
            for (int64_t c = 0; c < ic; ++c)
                for (int64_t kd = 0; kd < kernel[0]; ++kd)
                    for (int64_t kh = 0; kh < kernel[1]; ++kh)
                        rows[(c * kernel[0] + kd) * kernel[1] + kh] =
                            p + (n * ic + c) * volume + (d + kd) * plane + (h + kh) * padded[2];
            uint8_t* o = out + r * size[2] * k;
            for (int64_t x0 = 0; x0 < size[2]; ++x0, o += k)  // one voxel's taps, contiguous
                for (int64_t j = 0; j < k / 4; ++j) std::memcpy(o + j * 4, rows[j] + x0, 4);
        }
    };
    plan.addKernel("quantize taps " + descName(x.md) + "->" + descName(taps.md), kernel_fn,
                   {x, vol, taps});
    return taps;
}

}  // namespace

void addInt8ConvStep(Plan& plan, const Int8Conv& conv, const MemRef& src, const MemRef& dst,
                     const std::string& name) {
    std::vector<std::pair<int, MemRef>> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    for (const auto& [arg, m] : conv.constantArgs())
        args.push_back({arg, MemRef{-1, m.get_desc(), m}});
    // The plan keeps the convolution (its weights, bias and zero points) alive.
    plan.derivedConstant<Int8Conv>("int8 conv " + plan.node().name, [&] { return conv; });
    plan.addPrimitive(name, conv.primitive(), std::move(args), conv.scratchpadDesc());
}

Status planInt8Conv(Plan& plan, const quant::Int8Layer& layer, int weight_qmax) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : -1;
    if (!plan.has(x)) return nodeError(plan, "int8: its input is not computed before it");
    quant::Int8ConvSpec spec = quant::int8ConvGeometry(n, g.values[x].shape);
    const quant::Int8Weights w = quant::quantizeWeightsPerChannel(
        g.constant(n.inputs[1]).toFloats(), spec.out_channels, weight_qmax);
    std::vector<float> bias = b >= 0 ? g.constant(b).toFloats() : std::vector<float>{};
    const quant::ActivationQuant unit{1.0f, 0};
    if (layer.dst_s8) {  // for the normalisation that alone reads it (int8_policy.h)
        if (layer.drop_bias) bias.clear();
        quant::setRequantisationS8(spec, layer.src, w.scales, layer.s8_scales, bias);
    } else {
        spec.dst_f32 = !layer.dst_u8;
        spec.dst_bf16 = spec.dst_f32 && plan.actType() == dt::bf16;
        quant::setRequantisation(spec, layer.src, w.scales, layer.dst_u8 ? layer.dst : unit, bias,
                                 n.fused_residual >= 0 ? &unit : nullptr);
    }
    // A u8 producer's layout is kept when the same implementation takes it.
    const dnnl::memory::desc hint = plan.quantizedDesc(x);
    std::optional<Result<Int8Conv>> conv;
    std::optional<MemRef> taps;
    if (layer.tap_channels && hint == dnnl::memory::desc()) {
        // Where oneDNN takes the tap tensor as it is written; else the padded convolution.
        TapChannels t = tapChannelsOf(spec, w);
        auto tap_conv = Int8Conv::create(plan.engine(), t.spec, t.w, t.md);
        if (tap_conv.isOk() && tap_conv->srcDesc() == t.md) {
            VOXSEG_ASSIGN_OR_RETURN(MemRef xf, plan.ensurePlainF32(x));
            taps = planTapStep(plan, xf, t);
            conv = std::move(tap_conv);
        }
    }
    const bool halo = !taps && useHaloSource(spec, w, hint);
    if (!conv) conv = Int8Conv::create(plan.engine(), spec, w, hint);
    if (!conv->isOk()) return nodeError(plan, conv->status().message());
    MemRef src;
    if (taps) {
        src = *taps;
    } else {
        VOXSEG_ASSIGN_OR_RETURN(src, plan.ensureQuantized(x, (*conv)->srcDesc(), layer.src));
    }
    VOXSEG_ASSIGN_OR_RETURN(MemRef dst, destination(plan, n, (*conv)->dstDesc()));
    addInt8ConvStep(plan, **conv, src, dst,
                    "conv int8 " + (*conv)->implementation() + " " + descName(src.md) + "->" +
                        descName(dst.md) + (halo ? " halo" : "") + (taps ? " taps" : ""));
    plan.define(n.outputs[0], dst);
    // Epilogues the int8 convolution does not fuse (Sigmoid, SiLU, PReLU) run on its fp32 result.
    const bool act_fused = spec.activation != quant::Int8Activation::kNone;
    if (!act_fused && n.fused_activation != ActivationKind::kNone)
        return planUnfusedEpilogue(plan, dst, false, true);
    return Status::ok();
}

}  // namespace voxseg::engine::cpu
