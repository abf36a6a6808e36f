// InstanceNormalization, BatchNormalization (inference), GroupNormalization.
#include "engine/onnx/converter.h"

#include "engine/graph/broadcast.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {
namespace {

Status convertNorm(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    ctx.n.norm.epsilon = ctx.a.getFloat("epsilon", 1e-5f);
    if (op == "InstanceNormalization") {
        ctx.n.op = OpKind::kInstanceNorm;
        VOXSEG_RETURN_IF_ERROR(ctx.need(3));
    } else if (op == "BatchNormalization") {
        ctx.n.op = OpKind::kBatchNorm;
        VOXSEG_RETURN_IF_ERROR(ctx.need(5));
        ctx.a.ignore({"momentum", "spatial", "consumed_inputs", "is_test"});
        if (ctx.a.getInt("training_mode", 0) != 0)
            return ctx.err(StatusCode::kUnsupported,
                           ctx.desc + ": training_mode=1; export the model in eval() mode");
        ctx.dropExtraOutputs("training statistics");
        ctx.n.inputs.resize(5);
    } else {
        ctx.n.op = OpKind::kGroupNorm;
        VOXSEG_RETURN_IF_ERROR(ctx.need(3));
        ctx.n.norm.num_groups = ctx.a.getInt("num_groups", 0);
        ctx.a.ignore({"stash_type"});
        const int64_t c = ctx.shapeOf(0).size() > 1 ? ctx.shapeOf(0)[1] : 0;
        const int64_t groups = ctx.n.norm.num_groups;
        if (groups <= 0 || c % groups)
            return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": " + std::to_string(c) +
                                                             " channels, num_groups " +
                                                             std::to_string(groups));
        // Opset 18-20 scale/bias are per group: expand them to per channel.
        for (size_t k = 1; k < 3; ++k) {
            VOXSEG_RETURN_IF_ERROR(ctx.needConstant(k, "the scale/bias"));
            const Tensor& t = ctx.g().constant(ctx.in[k]);
            if (t.numel() == groups && groups != c) {
                const auto v = t.toFloats();
                std::vector<float> per_channel;
                for (int64_t ch = 0; ch < c; ++ch) per_channel.push_back(v[ch / (c / groups)]);
                ctx.n.inputs[k] =
                    ctx.s.constantValue(ctx.g().values[ctx.in[k]].name + "_per_channel",
                                        Tensor::fromFloats({c}, per_channel));
            }
        }
    }
    for (size_t k = 1; k < ctx.n.inputs.size(); ++k)
        VOXSEG_RETURN_IF_ERROR(ctx.needConstant(k, "the normalization parameters"));
    return Status::ok();
}

// LayerNormalization (opset 17): over axes [axis, rank); the mean / inv-std-dev outputs are
// training stashes voxseg does not compute. Scale and bias broadcast to the normalised shape are
// expanded to it here. The decomposed form older exporters emit is fused into this node by
// fuseLayerNormPattern (engine/passes/import_patterns.cpp).
Status convertLayerNorm(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    ctx.n.op = OpKind::kLayerNorm;
    const Shape x = ctx.shapeOf(0);
    const int64_t axis = normalizeAxis(ctx.a.getInt("axis", -1), x.size());
    if (axis < 0) return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": axis out of range");
    ctx.n.axis = axis;
    ctx.n.norm.epsilon = ctx.a.getFloat("epsilon", 1e-5f);
    ctx.a.ignore({"stash_type"});
    ctx.dropExtraOutputs("LayerNormalization mean / inverse standard deviation");
    const Shape normalised(x.begin() + axis, x.end());
    ctx.n.inputs.resize(3, -1);
    for (size_t k = 1; k < 3; ++k) {
        if (ctx.input(k) < 0) continue;
        VOXSEG_RETURN_IF_ERROR(ctx.needConstant(k, "the scale/bias"));
        const Tensor& t = ctx.constant(k);
        if (t.numel() == numel(normalised)) continue;
        auto b = broadcastShapes(t.shape(), normalised);
        if (!b || *b != normalised)
            return ctx.err(StatusCode::kInvalidArgument,
                           ctx.desc + ": scale/bias " + shapeToString(t.shape()) +
                               " do not broadcast to the normalised shape " +
                               shapeToString(normalised));
        // broadcast by repeating the trailing block (numpy rules, leading 1s)
        const std::vector<float> full = broadcastValues(t.toFloats(), t.shape(), normalised);
        ctx.n.inputs[k] = ctx.s.constantValue(ctx.tmpName(k == 1 ? "scale" : "bias"),
                                              Tensor::fromFloats(normalised, full));
    }
    if (ctx.n.inputs[2] < 0) ctx.n.inputs.resize(2);
    return Status::ok();
}

}  // namespace

void addNormConverters(ConverterTable& t) {
    t["InstanceNormalization"] = convertNorm;
    t["BatchNormalization"] = convertNorm;
    t["GroupNormalization"] = convertNorm;
    t["LayerNormalization"] = convertLayerNorm;
}

}  // namespace voxseg::engine::onnx_detail
