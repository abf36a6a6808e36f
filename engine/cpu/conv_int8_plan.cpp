// A Conv of the graph as an int8 convolution in the cpu backend's plan (docs/int8.md): weights
// quantised per output channel at compile time, the source quantised to u8 by a reorder (or read
// as the u8 an int8 producer wrote), the oneDNN int8 convolution (engine/cpu/conv_int8.h) with
// bias, residual add and ReLU/LeakyReLU in its epilogue, writing u8 for an int8 consumer, s8 per
// channel for a normalisation that takes 8-bit inputs, or float32 for the rest. Which Convs run
// here: engine/quant/int8_policy.h.
#include "engine/cpu/conv_int8.h"
#include "engine/cpu/plan.h"

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
    const bool halo = useHaloSource(spec, w, hint);
    auto conv = Int8Conv::create(plan.engine(), spec, w, hint);
    if (!conv.isOk()) return nodeError(plan, conv.status().message());
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensureQuantized(x, conv->srcDesc(), layer.src));
    VOXSEG_ASSIGN_OR_RETURN(MemRef dst, destination(plan, n, conv->dstDesc()));
    addInt8ConvStep(plan, *conv, src, dst,
                    "conv int8 " + conv->implementation() + " " + descName(src.md) + "->" +
                        descName(dst.md) + (halo ? " halo" : ""));
    plan.define(n.outputs[0], dst);
    // Epilogues the int8 convolution does not fuse (Sigmoid, SiLU, PReLU) run on its fp32 result.
    const bool act_fused = spec.activation != quant::Int8Activation::kNone;
    if (!act_fused && n.fused_activation != ActivationKind::kNone)
        return planUnfusedEpilogue(plan, dst, false, true);
    return Status::ok();
}

}  // namespace voxseg::engine::cpu
