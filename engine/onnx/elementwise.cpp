// Activations and elementwise arithmetic.
#include "engine/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {
namespace {

Status convertActivation(NodeContext& ctx) {
    const std::string& op = ctx.proto.op_type();
    if (op == "LeakyRelu") {
        VOXSEG_RETURN_IF_ERROR(ctx.need(1));
        ctx.n.op = OpKind::kLeakyRelu;
        ctx.n.alpha = ctx.a.getFloat("alpha", 0.01f);
    } else if (op == "PRelu") {
        VOXSEG_RETURN_IF_ERROR(ctx.need(2));
        VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "the slope"));
        ctx.n.op = OpKind::kPRelu;
    } else {
        VOXSEG_RETURN_IF_ERROR(ctx.need(1));
        ctx.n.op = op == "Relu"      ? OpKind::kRelu
                   : op == "Sigmoid" ? OpKind::kSigmoid
                                     : OpKind::kTanh;
    }
    return Status::ok();
}

Status convertBinary(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    ctx.n.op = op == "Add"   ? OpKind::kAdd
               : op == "Sub" ? OpKind::kSub
               : op == "Mul" ? OpKind::kMul
                             : OpKind::kDiv;
    ctx.a.ignore({});
    if (ctx.a.has("broadcast") || ctx.a.has("axis"))
        return ctx.err(StatusCode::kUnsupported,
                       ctx.desc + ": legacy broadcast attributes (opset < 7); re-export");
    return Status::ok();
}

Status convertClip(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kClip;
    ctx.n.clip_min = -std::numeric_limits<float>::infinity();
    ctx.n.clip_max = std::numeric_limits<float>::infinity();
    if (ctx.opset() < 11) {
        ctx.n.clip_min = ctx.a.getFloat("min", ctx.n.clip_min);
        ctx.n.clip_max = ctx.a.getFloat("max", ctx.n.clip_max);
    } else {
        for (size_t k = 1; k < 3; ++k) VOXSEG_RETURN_IF_ERROR(ctx.needConstant(k, "min/max"));
        for (size_t k = 1; k < 3; ++k)
            if (ctx.input(k) >= 0 && !onnx_detail::scalarOf(ctx.g().constant(ctx.in[k])))
                return ctx.err(StatusCode::kInvalidArgument,
                               ctx.desc + ": min/max must be scalars");
        if (ctx.input(1) >= 0)
            ctx.n.clip_min = float(*onnx_detail::scalarOf(ctx.g().constant(ctx.in[1])));
        if (ctx.input(2) >= 0)
            ctx.n.clip_max = float(*onnx_detail::scalarOf(ctx.g().constant(ctx.in[2])));
    }
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

}  // namespace

void addElementwiseConverters(ConverterTable& t) {
    t["Relu"] = convertActivation;
    t["Sigmoid"] = convertActivation;
    t["Tanh"] = convertActivation;
    t["LeakyRelu"] = convertActivation;
    t["PRelu"] = convertActivation;
    t["Add"] = convertBinary;
    t["Sub"] = convertBinary;
    t["Mul"] = convertBinary;
    t["Div"] = convertBinary;
    t["Clip"] = convertClip;
}

}  // namespace voxseg::engine::onnx_detail
