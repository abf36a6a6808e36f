// Softmax and reductions.
#include "engine/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {
namespace {

Status convertSoftmax(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kSoftmax;
    const Shape x = ctx.shapeOf(0);
    const int64_t rank = static_cast<int64_t>(x.size());
    int64_t axis = ctx.a.getInt("axis", ctx.opset() >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank)
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": axis out of range");
    ctx.n.axis = axis;
    bool trailing_ones = true;
    for (int64_t i = axis + 1; i < rank; ++i) trailing_ones &= x[i] == 1;
    if (ctx.opset() < 13 && !trailing_ones) {
        // Before opset 13 Softmax normalises over all axes from `axis` on, jointly:
        // flatten them, softmax the last axis, restore the shape.
        VOXSEG_RETURN_IF_ERROR(ctx.a.checkAllKnown());
        Node flat;
        flat.op = OpKind::kReshape;
        flat.name = ctx.n.name + "/flatten";
        flat.inputs = {ctx.in[0]};
        flat.shape.assign(x.begin(), x.begin() + axis);
        if (!flat.shape.empty()) flat.shape[0] = 0;
        flat.shape.push_back(-1);
        VOXSEG_RETURN_IF_ERROR(ctx.s.emit(flat, ctx.tmpName("flat")));
        ctx.n.inputs = {ctx.s.idOf(ctx.tmpName("flat"))};
        VOXSEG_RETURN_IF_ERROR(ctx.s.emit(ctx.n, ctx.tmpName("softmax")));
        Node back;
        back.op = OpKind::kReshape;
        back.name = ctx.n.name + "/unflatten";
        back.inputs = {ctx.s.idOf(ctx.tmpName("softmax"))};
        back.shape = x;
        back.shape[0] = 0;
        ctx.emitted = true;
        return ctx.s.emit(back, ctx.proto.output(0));
    }
    return Status::ok();
}

// ReduceMean / ReduceSum / ReduceMax: axes from the attribute (before opset 18; ReduceSum
// before 13) or from a constant input, keepdims, noop_with_empty_axes.
Status convertReduce(NodeContext& ctx) {
    const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = op == "ReduceMean"  ? OpKind::kReduceMean
               : op == "ReduceSum" ? OpKind::kReduceSum
                                   : OpKind::kReduceMax;
    const size_t rank = ctx.shapeOf(0).size();
    std::vector<int64_t> axes;
    const bool axes_input = op == "ReduceSum" ? ctx.opset() >= 13 : ctx.opset() >= 18;
    if (axes_input) {
        VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "axes"));
        if (ctx.input(1) >= 0) axes = ctx.constant(1).toInt64s();
    } else {
        axes = ctx.a.getInts("axes");
    }
    ctx.n.keepdims = ctx.a.getInt("keepdims", 1) != 0;
    const bool noop = ctx.a.getInt("noop_with_empty_axes", 0) != 0;
    ctx.n.inputs = {ctx.in[0]};
    if (axes.empty() && noop) {
        ctx.n.op = OpKind::kIdentity;
        return Status::ok();
    }
    for (int64_t& ax : axes) {
        ax = normalizeAxis(ax, rank);
        if (ax < 0) return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": axis out of range");
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    if (axes.empty())
        for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
    ctx.n.reduce_axes = axes;
    return Status::ok();
}

}  // namespace

void addReduceConverters(ConverterTable& t) {
    t["Softmax"] = convertSoftmax;
    t["ReduceMean"] = convertReduce;
    t["ReduceSum"] = convertReduce;
    t["ReduceMax"] = convertReduce;
}

}  // namespace voxseg::engine::onnx_detail
