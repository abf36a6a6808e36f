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

// The less common activations (MONAI's Act factory: ELU, SELU, CELU, Softplus, Mish;
// MobileNet / EfficientNet encoders: HardSigmoid, HardSwish), each one node whose formula every
// backend takes from engine/graph/unary_math.h. Attribute defaults as in the ONNX operator docs.
Status convertUnaryActivation(NodeContext& ctx) {
    const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    if (op == "Elu") {
        ctx.n.op = OpKind::kElu;
        ctx.n.alpha = ctx.a.getFloat("alpha", 1.0f);
    } else if (op == "Selu") {
        ctx.n.op = OpKind::kSelu;
        ctx.n.alpha = ctx.a.getFloat("alpha", 1.67326319217681884765625f);
        ctx.n.beta = ctx.a.getFloat("gamma", 1.05070102214813232421875f);
    } else if (op == "Celu") {
        ctx.n.op = OpKind::kCelu;
        ctx.n.alpha = ctx.a.getFloat("alpha", 1.0f);
        if (ctx.n.alpha == 0.0f || !std::isfinite(ctx.n.alpha))
            return ctx.err(StatusCode::kInvalidArgument,
                           ctx.desc + ": alpha must be finite and non-zero (Celu divides by it)");
    } else if (op == "HardSigmoid") {
        ctx.n.op = OpKind::kHardSigmoid;
        ctx.n.alpha = ctx.a.getFloat("alpha", 0.2f);
        ctx.n.beta = ctx.a.getFloat("beta", 0.5f);
    } else {
        ctx.n.op = op == "Softplus" ? OpKind::kSoftplus
                   : op == "Mish"   ? OpKind::kMish
                                    : OpKind::kHardSwish;
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
            if (ctx.input(k) >= 0 && !scalarOf(ctx.g().constant(ctx.in[k])))
                return ctx.err(StatusCode::kInvalidArgument,
                               ctx.desc + ": min/max must be scalars");
        if (ctx.input(1) >= 0) ctx.n.clip_min = float(*scalarOf(ctx.g().constant(ctx.in[1])));
        if (ctx.input(2) >= 0) ctx.n.clip_max = float(*scalarOf(ctx.g().constant(ctx.in[2])));
    }
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

Status convertUnaryMath(NodeContext& ctx) {
    const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = op == "Erf"   ? OpKind::kErf
               : op == "Sin" ? OpKind::kSin
               : op == "Cos" ? OpKind::kCos
                             : OpKind::kSqrt;
    return Status::ok();
}

// Gelu (opset 20): approximate "none" (erf) or "tanh". Older exports spell it out as
// x * 0.5 * (1 + erf(x / sqrt(2))); fuseGeluPattern (engine/passes/import_patterns.cpp) turns that
// into this node.
Status convertGelu(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kGelu;
    const std::string approx = ctx.a.getString("approximate", "none");
    if (approx != "none" && approx != "tanh")
        return ctx.err(StatusCode::kUnsupported, ctx.desc + ": approximate '" + approx + "'");
    ctx.n.gelu_tanh = approx == "tanh";
    return Status::ok();
}

// Neg as a Mul by -1 (rotary embeddings' rotate_half).
Status convertNeg(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kMul;
    ctx.n.inputs = {ctx.in[0],
                    ctx.s.constantValue(ctx.tmpName("minus_one"), Tensor::fromFloats({}, {-1.0f}))};
    return Status::ok();
}

// Pow with a constant exponent exporters use: 2 (LayerNorm's variance) as x * x, 0.5 as Sqrt,
// 1 as Identity.
Status convertPow(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "the exponent"));
    const auto e = scalarOf(ctx.constant(1));
    if (!e) return ctx.err(StatusCode::kUnsupported, ctx.desc + ": a non-scalar exponent");
    if (*e == 2.0) {
        ctx.n.op = OpKind::kMul;
        ctx.n.inputs = {ctx.in[0], ctx.in[0]};
    } else if (*e == 0.5) {
        ctx.n.op = OpKind::kSqrt;
        ctx.n.inputs = {ctx.in[0]};
    } else if (*e == 1.0) {
        ctx.n.op = OpKind::kIdentity;
        ctx.n.inputs = {ctx.in[0]};
    } else {
        return ctx.err(StatusCode::kUnsupported,
                       ctx.desc + ": exponent " + std::to_string(*e) +
                           " (voxseg runs Pow with exponent 2, 0.5 or 1)");
    }
    return Status::ok();
}

// Where(condition, X, Y): the condition may be a folded constant (masks, shifted-window
// attention) or a float tensor; a comparison computed at run time is not supported.
Status convertWhere(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(3));
    ctx.n.op = OpKind::kWhere;
    if (!ctx.isConstant(0) && ctx.g().values[ctx.in[0]].dtype != DType::kFloat32)
        return ctx.err(StatusCode::kUnsupported,
                       ctx.desc + ": the condition is a " +
                           dtypeName(ctx.g().values[ctx.in[0]].dtype) +
                           " tensor computed at run time (a comparison of activations); voxseg "
                           "runs Where on constant conditions");
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
    t["Erf"] = convertUnaryMath;
    t["Sin"] = convertUnaryMath;
    t["Cos"] = convertUnaryMath;
    t["Sqrt"] = convertUnaryMath;
    t["Gelu"] = convertGelu;
    t["Neg"] = convertNeg;
    t["Pow"] = convertPow;
    t["Where"] = convertWhere;
    for (const char* op : {"Elu", "Selu", "Celu", "Softplus", "Mish", "HardSigmoid", "HardSwish"})
        t[op] = convertUnaryActivation;
}

}  // namespace voxseg::engine::onnx_detail
