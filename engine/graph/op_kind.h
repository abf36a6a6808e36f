// Every op of voxseg's Graph IR (engine/graph/graph.h): the OpKind enum, and once for each op its
// display name and its category. Switches that treat a family alike (shape rules, backends'
// dispatch, the CUDA lowering) ask opCategory() instead of listing the family's members, so an
// op added to a family needs no case there. Pure constants; thread-safe.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>

#include "engine/graph/unary_math.h"

namespace voxseg::engine {

enum class OpKind {
    kConv,
    kConvTranspose,
    kInstanceNorm,  // inputs X, scale [C], bias [C]; statistics over the spatial axes
    kBatchNorm,     // inference form: X, scale, bias, mean, var inputs (all [C])
    kGroupNorm,     // inputs X, scale [C], bias [C] (per channel, also for ONNX opset-18 models)
    kRelu,
    kLeakyRelu,
    kPRelu,  // inputs X, slope (constant, broadcast to X: [C,1,1,1] or [1])
    kSigmoid,
    kTanh,
    kSoftmax,  // over one axis (opset-13 semantics; older models are rewritten at import)
    kAdd,      // elementwise with numpy broadcasting
    kSub,
    kMul,
    kDiv,
    kConcat,
    kResize,  // also ONNX Upsample
    kMaxPool,
    kAveragePool,
    kGlobalAveragePool,
    kPad,
    kIdentity,  // also Dropout (inference) and no-op Cast/Reshape-to-same
    kReshape,   // one input; target in Node::shape (ONNX rules: 0 copies a dim, -1 is inferred)
    kTranspose,
    kSlice,  // static starts/ends/axes/steps (ONNX rules; resolveSlice() clamps them)
    kClip,   // clip_min / clip_max (+-infinity when absent)
    // Transformer / attention ops (issue 14). All float32; shape rules in engine/graph/shapes/.
    kMatMul,     // numpy matmul: [..., M, K] x [..., K, N] -> [..., M, N], batch dims broadcast;
                 // optional third input (optimize()): a constant bias [N] added along the last axis
    kLayerNorm,  // inputs X, scale, bias (-1: none), both of prod(X[axis:]) values; over [axis,
                 // rank)
    kErf,
    kGelu,  // x * Phi(x); gelu_tanh: the tanh approximation (ONNX Gelu approximate="tanh")
    kSilu,  // x * sigmoid(x) (fused from the Mul(x, Sigmoid(x)) exporters emit)
    kSqrt,
    kSin,
    kCos,
    kReduceMean,  // over reduce_axes (sorted, in [0, rank)), keepdims
    kReduceSum,
    kReduceMax,
    kWhere,   // inputs condition (nonzero: take X), X, Y; numpy broadcasting of all three
    kExpand,  // input broadcast with Node::shape (ONNX Expand: numpy rules, both ways)
    kTile,    // input repeated Node::repeats times along each axis
    // torch.roll (fused by optimize() from the exported Slice/Concat pairs): y[..., i, ...] =
    // x[..., (i - roll_shifts[d]) mod n_d, ...] along every axis d, shifts in [0, n_d).
    kRoll,
    // Scaled-dot-product attention, fused by optimize(): softmax(Q Kt * attention_scale
    // [+ bias] [+ mask]) V over the last axis. Inputs Q [..., Tq, D], Kt [..., D, Tk], V
    // [..., Tk, Dv] (equal batch dims), then up to two additive biases (-1: none) broadcast to
    // the scores [..., Tq, Tk], where a batch axis of a bias may also tile: P items along an
    // axis of P*k are read at coordinate % P (Swin's shifted-window mask [nW, 1, Tq, Tk] on the
    // scores of B*nW windows; optimize() folds its Reshape/Add/Reshape in). Output [..., Tq, Dv].
    kAttention,
    // Rotary position embedding, interleaved pairs (EVA / Primus; fused by optimize() from the
    // exported Slice/Neg/Concat/Mul/Add chain): inputs X [..., T, D] (D even), cos and sin
    // (constants, T*D values). y = X * cos + rot(X) * sin with rot(X)[2i] = -X[2i+1],
    // rot(X)[2i+1] = X[2i].
    kRotary,
    // LayerNorm over the channel axis at each position (nnU-Net's LayerNormNd in Primus'
    // decoder, ConvNeXt's channels-first LayerNorm; fused at import from the exported
    // ReduceMean(axis 1)/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul/Add] chain): inputs X [N, C, ...]
    // (rank >= 3), scale [C], bias [C] (-1: none), all constants but X; norm.epsilon.
    // y[n, c, s] = (x - mean_c) / sqrt(var_c + eps) * scale[c] + bias[c].
    kChannelLayerNorm,
    // Attention with the heads packed in the last axis (optimize() folds the head split and
    // merge Transposes of an Attention into it): inputs Q [B, Tq, H*D], K [B, Tk, H*D] (not
    // transposed), V [B, Tk, H*Dv], biases as Attention's broadcast to [B, H, Tq, Tk];
    // attention_heads = H, attention_scale. Output [B, Tq, H*Dv]: per head h the columns
    // [h*Dv, (h+1)*Dv) are softmax(Q_h K_h^T * scale [+ bias_h]) V_h.
    kMultiHeadAttention,
    // Activations of the less common kinds (MONAI's Act factory, MobileNet / EfficientNet
    // encoders): formulas in engine/graph/unary_math.h; alpha and beta as ONNX names them.
    kElu,          // x > 0 ? x : alpha (e^x - 1)
    kSelu,         // gamma (x > 0 ? x : alpha (e^x - 1)), gamma in beta
    kCelu,         // max(0, x) + min(0, alpha (e^(x / alpha) - 1))
    kSoftplus,     // log(1 + e^x)
    kMish,         // x tanh(softplus(x))
    kHardSigmoid,  // max(0, min(1, alpha x + beta))
    kHardSwish,    // x max(0, min(1, x / 6 + 1 / 2))
    // A decoder's up-sampling folded into the convolution after its concat (made by the cpu
    // backend's engine/passes/fold_upsampling.h, never imported): inputs P [N, G*O, D', H', W']
    // (the parity convolution), Y [N, O, D, H, W] (the skip half's convolution), optionally a
    // constant border correction [64, O] (-1: none) and the folded Conv's own bias [O] (already
    // in Y: for a backend that writes y less it, as a normalisation's 8-bit input, int8_policy.h;
    // the op's value does not use it); Node::subpixel holds the factor s (1 or 2) per spatial
    // axis, G their product. y[n, o, z, y, x] = Y[n, o, z, y, x] + P[n, g * O + o, jz, jy, jx]
    // + corr[class, o], per axis with parity p = i % s and j = i / s + p (s = 2) or j = i (s = 1),
    // g = (pz * sy + py) * sx + px, and class = (cz * 4 + cy) * 4 + cx with c = (i == 0) +
    // 2 (i == size - 1) per axis.
    kSubpixelAdd,
};

enum class OpCategory {
    kConv,               // Conv, ConvTranspose
    kNorm,               // statistics over some axes, then an affine map
    kUnaryElementwise,   // y = f(x) per element, output shape = input shape
    kBinaryElementwise,  // numpy broadcasting of two operands
    kReduction,          // over reduce_axes
    kPool,               // windows over the spatial axes (and GlobalAveragePool)
    kResize,             // Resize / Upsample
    kShape,              // data movement: reshape, transpose, slice, concat, pad, tile, ...
    kMatMul,             // MatMul
    kAttention,          // Softmax and the fused attention ops
};

struct OpInfo {
    OpKind kind;
    const char* name;  // ONNX's spelling where ONNX has the op
    OpCategory category;
    // The formula of a unary op computed from engine/graph/unary_math.h by every backend
    // (nullopt: the op has its own kernels, e.g. the activations oneDNN fuses).
    std::optional<UnaryFn> unary_fn = std::nullopt;
};

// Indexed by OpKind (checked at compile time below).
inline constexpr OpInfo kOpInfo[] = {
    {OpKind::kConv, "Conv", OpCategory::kConv},
    {OpKind::kConvTranspose, "ConvTranspose", OpCategory::kConv},
    {OpKind::kInstanceNorm, "InstanceNormalization", OpCategory::kNorm},
    {OpKind::kBatchNorm, "BatchNormalization", OpCategory::kNorm},
    {OpKind::kGroupNorm, "GroupNormalization", OpCategory::kNorm},
    {OpKind::kRelu, "Relu", OpCategory::kUnaryElementwise},
    {OpKind::kLeakyRelu, "LeakyRelu", OpCategory::kUnaryElementwise},
    {OpKind::kPRelu, "PRelu", OpCategory::kBinaryElementwise},
    {OpKind::kSigmoid, "Sigmoid", OpCategory::kUnaryElementwise},
    {OpKind::kTanh, "Tanh", OpCategory::kUnaryElementwise},
    {OpKind::kSoftmax, "Softmax", OpCategory::kAttention},
    {OpKind::kAdd, "Add", OpCategory::kBinaryElementwise},
    {OpKind::kSub, "Sub", OpCategory::kBinaryElementwise},
    {OpKind::kMul, "Mul", OpCategory::kBinaryElementwise},
    {OpKind::kDiv, "Div", OpCategory::kBinaryElementwise},
    {OpKind::kConcat, "Concat", OpCategory::kShape},
    {OpKind::kResize, "Resize", OpCategory::kResize},
    {OpKind::kMaxPool, "MaxPool", OpCategory::kPool},
    {OpKind::kAveragePool, "AveragePool", OpCategory::kPool},
    {OpKind::kGlobalAveragePool, "GlobalAveragePool", OpCategory::kPool},
    {OpKind::kPad, "Pad", OpCategory::kShape},
    {OpKind::kIdentity, "Identity", OpCategory::kUnaryElementwise},
    {OpKind::kReshape, "Reshape", OpCategory::kShape},
    {OpKind::kTranspose, "Transpose", OpCategory::kShape},
    {OpKind::kSlice, "Slice", OpCategory::kShape},
    {OpKind::kClip, "Clip", OpCategory::kUnaryElementwise},
    {OpKind::kMatMul, "MatMul", OpCategory::kMatMul},
    {OpKind::kLayerNorm, "LayerNormalization", OpCategory::kNorm},
    {OpKind::kErf, "Erf", OpCategory::kUnaryElementwise, UnaryFn::kErf},
    {OpKind::kGelu, "Gelu", OpCategory::kUnaryElementwise},
    {OpKind::kSilu, "SiLU", OpCategory::kUnaryElementwise},
    {OpKind::kSqrt, "Sqrt", OpCategory::kUnaryElementwise, UnaryFn::kSqrt},
    {OpKind::kSin, "Sin", OpCategory::kUnaryElementwise, UnaryFn::kSin},
    {OpKind::kCos, "Cos", OpCategory::kUnaryElementwise, UnaryFn::kCos},
    {OpKind::kReduceMean, "ReduceMean", OpCategory::kReduction},
    {OpKind::kReduceSum, "ReduceSum", OpCategory::kReduction},
    {OpKind::kReduceMax, "ReduceMax", OpCategory::kReduction},
    {OpKind::kWhere, "Where", OpCategory::kShape},
    {OpKind::kExpand, "Expand", OpCategory::kShape},
    {OpKind::kTile, "Tile", OpCategory::kShape},
    {OpKind::kRoll, "Roll", OpCategory::kShape},
    {OpKind::kAttention, "Attention", OpCategory::kAttention},
    {OpKind::kRotary, "Rotary", OpCategory::kAttention},
    {OpKind::kChannelLayerNorm, "ChannelLayerNorm", OpCategory::kNorm},
    {OpKind::kMultiHeadAttention, "MultiHeadAttention", OpCategory::kAttention},
    {OpKind::kElu, "Elu", OpCategory::kUnaryElementwise, UnaryFn::kElu},
    {OpKind::kSelu, "Selu", OpCategory::kUnaryElementwise, UnaryFn::kSelu},
    {OpKind::kCelu, "Celu", OpCategory::kUnaryElementwise, UnaryFn::kCelu},
    {OpKind::kSoftplus, "Softplus", OpCategory::kUnaryElementwise, UnaryFn::kSoftplus},
    {OpKind::kMish, "Mish", OpCategory::kUnaryElementwise, UnaryFn::kMish},
    {OpKind::kHardSigmoid, "HardSigmoid", OpCategory::kUnaryElementwise, UnaryFn::kHardSigmoid},
    {OpKind::kHardSwish, "HardSwish", OpCategory::kUnaryElementwise, UnaryFn::kHardSwish},
    {OpKind::kSubpixelAdd, "SubpixelAdd", OpCategory::kShape},
};

constexpr bool opTableInEnumOrder() {
    for (size_t i = 0; i < std::size(kOpInfo); ++i)
        if (static_cast<size_t>(kOpInfo[i].kind) != i) return false;
    return true;
}
static_assert(opTableInEnumOrder(), "kOpInfo: one row per OpKind, in the enum's order");
static_assert(std::size(kOpInfo) == static_cast<size_t>(OpKind::kSubpixelAdd) + 1,
              "kOpInfo: a row for every OpKind (the last one is kSubpixelAdd)");

constexpr const OpInfo& opInfo(OpKind op) { return kOpInfo[static_cast<size_t>(op)]; }
constexpr const char* opKindName(OpKind op) { return opInfo(op).name; }
constexpr OpCategory opCategory(OpKind op) { return opInfo(op).category; }
constexpr std::optional<UnaryFn> unaryFnOf(OpKind op) { return opInfo(op).unary_fn; }

}  // namespace voxseg::engine
