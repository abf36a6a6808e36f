// The shape-rule table (one rule per IR op, in the family files listed in shape_rules.h) and
// what the rules share.
#include "engine/graph/shapes/shape_rules.h"

namespace voxseg::engine::shapes {

Status NodeShapes::need(size_t n) const {
    if (node.inputs.size() < n) return error("expects " + std::to_string(n) + " inputs");
    for (size_t i = 0; i < n; ++i)
        if (node.inputs[i] < 0) return error("input " + std::to_string(i) + " missing");
    if (node.outputs.empty()) return error("has no output");
    return Status::ok();
}

Status NodeShapes::error(const std::string& what) const {
    return invalidArgument(std::string(opKindName(node.op)) + " node '" + node.name + "': " + what);
}

int64_t windowOutput(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pb,
                     int64_t pe, bool ceil_mode) {
    // In 128 bits: a hostile model's attributes must not overflow (0 = refused by the caller).
    using Wide = __int128;
    if (stride <= 0) return 0;
    const Wide span = Wide(dilation) * (Wide(kernel) - 1) + 1;
    const Wide avail = Wide(in) + pb + pe - span;
    if (avail < 0) return 0;
    Wide out = (ceil_mode ? (avail + stride - 1) / stride : avail / stride) + 1;
    // A last window that starts in the end padding is dropped (PyTorch and ONNX Runtime).
    if (ceil_mode && (out - 1) * stride >= Wide(in) + pb) --out;
    return out > Wide(kMaxDim) ? 0 : static_cast<int64_t>(out);
}

ShapeRule shapeRule(OpKind op) {
    // A whole family with one rule: an op added to it needs no case here.
    if (opCategory(op) == OpCategory::kUnaryElementwise) return unaryShape;
    switch (op) {
        case OpKind::kConv:
        case OpKind::kConvTranspose:
            return convShape;
        case OpKind::kSubpixelAdd:
            return subpixelAddShape;
        case OpKind::kInstanceNorm:
        case OpKind::kGroupNorm:
        case OpKind::kBatchNorm:
            return channelNormShape;
        case OpKind::kLayerNorm:
            return layerNormShape;
        case OpKind::kChannelLayerNorm:
            return channelLayerNormShape;
        case OpKind::kPRelu:
            return preluShape;
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv:
            return binaryShape;
        case OpKind::kWhere:
            return whereShape;
        case OpKind::kSoftmax:
            return softmaxShape;
        case OpKind::kReduceMean:
        case OpKind::kReduceSum:
        case OpKind::kReduceMax:
            return reduceShape;
        case OpKind::kMatMul:
            return matMulShape;
        case OpKind::kAttention:
            return attentionShape;
        case OpKind::kMultiHeadAttention:
            return multiHeadAttentionShape;
        case OpKind::kRotary:
            return rotaryShape;
        case OpKind::kMaxPool:
        case OpKind::kAveragePool:
            return poolShape;
        case OpKind::kGlobalAveragePool:
            return globalAveragePoolShape;
        case OpKind::kResize:
            return resizeShape;
        case OpKind::kReshape:
            return reshapeShape;
        case OpKind::kTranspose:
            return transposeShape;
        case OpKind::kSlice:
            return sliceShape;
        case OpKind::kPad:
            return padShape;
        case OpKind::kConcat:
            return concatShape;
        case OpKind::kExpand:
            return expandShape;
        case OpKind::kTile:
            return tileShape;
        case OpKind::kRoll:
            return rollShape;
        default:
            break;
    }
    return nullptr;
}

}  // namespace voxseg::engine::shapes
