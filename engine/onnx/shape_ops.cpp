// Data movement: Identity/Dropout/Cast, the Reshape family, Transpose, Slice, Pad, Concat.
#include "engine/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {
namespace {

Status convertIdentity(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kIdentity;
    if (op == "Dropout") {
        ctx.a.ignore({"ratio", "seed", "is_test"});
        if (ctx.input(2) >= 0 && (!ctx.g().isConstant(ctx.in[2]) ||
                                  scalarOf(ctx.g().constant(ctx.in[2])).value_or(1) != 0))
            return ctx.err(StatusCode::kUnsupported,
                           ctx.desc + ": training_mode; export in eval()");
        ctx.dropExtraOutputs("dropout mask");
    }
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

Status convertCast(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    const int64_t to = ctx.a.getInt("to", 1);
    ctx.a.ignore({"saturate"});
    if (to != onnx::TensorProto_DataType_FLOAT)
        return ctx.err(StatusCode::kUnsupported, ctx.desc + ": cast of activations to ONNX type " +
                                                     std::to_string(to) +
                                                     " (voxseg computes activations in float32)");
    ctx.n.op = OpKind::kIdentity;
    return Status::ok();
}

Status convertReshape(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kReshape;
    const Shape x = ctx.shapeOf(0);
    Shape target;
    if (op == "Reshape") {
        VOXSEG_RETURN_IF_ERROR(ctx.need(2));
        VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "the target shape"));
        target = ctx.g().constant(ctx.in[1]).toInt64s();
        if (ctx.a.getInt("allowzero", 0) != 0 &&
            std::find(target.begin(), target.end(), 0) != target.end())
            return ctx.err(StatusCode::kUnsupported,
                           ctx.desc + ": allowzero with a 0 in the shape");
        for (size_t i = 0; i < target.size(); ++i)
            if (target[i] == 0 && i < x.size()) target[i] = x[i];
    } else if (op == "Flatten") {
        int64_t axis = ctx.a.getInt("axis", 1);
        if (axis < 0) axis += static_cast<int64_t>(x.size());
        int64_t outer = 1;
        for (int64_t i = 0; i < axis; ++i) outer *= x[i];
        target = {outer, numel(x) / std::max<int64_t>(outer, 1)};
    } else {
        std::vector<int64_t> axes;
        if (ctx.opset() >= 13) {
            VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "axes"));
            if (ctx.input(1) >= 0) axes = ctx.g().constant(ctx.in[1]).toInt64s();
        } else {
            axes = ctx.a.getInts("axes");
        }
        const bool unsq = op == "Unsqueeze";
        const size_t rank = unsq ? x.size() + axes.size() : x.size();
        for (int64_t& ax : axes) ax = ax < 0 ? ax + static_cast<int64_t>(rank) : ax;
        size_t j = 0;
        for (size_t i = 0; i < rank; ++i) {
            const bool listed =
                std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
            if (unsq) {
                target.push_back(listed ? 1 : x[j++]);
            } else if (!((axes.empty() && x[i] == 1) || (listed && x[i] == 1))) {
                target.push_back(x[i]);
            }
        }
    }
    // A target that keeps the batch dim copies it (0), so the graph works for any batch.
    if (!target.empty() && !x.empty() && target[0] == x[0]) target[0] = 0;
    ctx.n.shape = target;
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

Status convertTranspose(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kTranspose;
    const size_t rank = ctx.shapeOf(0).size();
    ctx.n.perm = ctx.a.getInts("perm");
    if (ctx.n.perm.empty())
        for (size_t i = 0; i < rank; ++i) ctx.n.perm.push_back(static_cast<int64_t>(rank - 1 - i));
    return Status::ok();
}

Status convertSlice(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kSlice;
    if (ctx.opset() >= 10) {
        VOXSEG_RETURN_IF_ERROR(ctx.need(3));
        for (size_t k = 1; k < 5; ++k) VOXSEG_RETURN_IF_ERROR(ctx.needConstant(k, "slice bounds"));
        ctx.n.slice_starts = ctx.g().constant(ctx.in[1]).toInt64s();
        ctx.n.slice_ends = ctx.g().constant(ctx.in[2]).toInt64s();
        if (ctx.input(3) >= 0) ctx.n.slice_axes = ctx.g().constant(ctx.in[3]).toInt64s();
        if (ctx.input(4) >= 0) ctx.n.slice_steps = ctx.g().constant(ctx.in[4]).toInt64s();
    } else {
        ctx.n.slice_starts = ctx.a.getInts("starts");
        ctx.n.slice_ends = ctx.a.getInts("ends");
        ctx.n.slice_axes = ctx.a.getInts("axes");
    }
    for (int64_t& ax : ctx.n.slice_axes)
        if (ax < 0) ax += static_cast<int64_t>(ctx.shapeOf(0).size());
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

Status convertPad(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kPad;
    const Shape x = ctx.shapeOf(0);
    const std::string mode = ctx.a.getString("mode", "constant");
    if (mode == "constant")
        ctx.n.pad.mode = PadAttrs::Mode::kConstant;
    else if (mode == "reflect")
        ctx.n.pad.mode = PadAttrs::Mode::kReflect;
    else if (mode == "edge")
        ctx.n.pad.mode = PadAttrs::Mode::kEdge;
    else
        return ctx.err(StatusCode::kUnsupported, ctx.desc + ": mode '" + mode + "'");
    std::vector<int64_t> pads;
    if (ctx.opset() < 11) {
        pads = ctx.a.getInts("pads");
        ctx.n.pad.value = ctx.a.getFloat("value", 0.0f);
    } else {
        VOXSEG_RETURN_IF_ERROR(ctx.need(2));
        for (size_t k = 1; k < 4; ++k)
            VOXSEG_RETURN_IF_ERROR(ctx.needConstant(k, "pads/value/axes"));
        pads = ctx.g().constant(ctx.in[1]).toInt64s();
        if (ctx.input(2) >= 0 && ctx.g().constant(ctx.in[2]).numel() > 0)
            ctx.n.pad.value = static_cast<float>(scalarOf(ctx.g().constant(ctx.in[2])).value_or(0));
        if (ctx.input(3) >= 0) {
            const auto axes = ctx.g().constant(ctx.in[3]).toInt64s();
            std::vector<int64_t> full(2 * x.size(), 0);
            if (pads.size() != 2 * axes.size())
                return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": pads/axes lengths");
            for (size_t k = 0; k < axes.size(); ++k) {
                const int64_t ax = axes[k] < 0 ? axes[k] + int64_t(x.size()) : axes[k];
                if (ax < 0 || ax >= int64_t(x.size()))
                    return ctx.err(StatusCode::kInvalidArgument,
                                   ctx.desc + ": axis " + std::to_string(axes[k]) +
                                       " outside rank " + std::to_string(x.size()));
                full[ax] = pads[k];
                full[x.size() + ax] = pads[axes.size() + k];
            }
            pads = full;
        }
    }
    if (pads.size() != 2 * x.size())
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": " + std::to_string(pads.size()) +
                                                         " pads for rank " +
                                                         std::to_string(x.size()));
    ctx.n.pad.pads_begin.assign(pads.begin(), pads.begin() + x.size());
    ctx.n.pad.pads_end.assign(pads.begin() + x.size(), pads.end());
    ctx.n.inputs = {ctx.in[0]};
    // nnU-Net's residual encoders export AvgPool3d(ceil_mode) skips as Pad(0, ..., 0) then
    // AveragePool: a copy of the whole activation (12.7 % of ResEnc-M's time at 1 thread, with
    // a reorder to plain layout and back). No pads: the input itself.
    if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
        ctx.n.op = OpKind::kIdentity;
    return Status::ok();
}

Status convertConcat(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    if (ctx.in.empty()) return ctx.err(StatusCode::kCorruptData, ctx.desc + ": no inputs");
    VOXSEG_RETURN_IF_ERROR(ctx.need(ctx.in.size()));
    ctx.n.op = OpKind::kConcat;
    int64_t axis = ctx.a.getInt("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(ctx.shapeOf(0).size());
    ctx.n.axis = axis;
    // Constant operands (rare) are materialised as float constants by the reference path.
    return Status::ok();
}

// Split into constant sizes along any axis (split attribute before opset 13, input after;
// num_outputs in opset 18; equal parts otherwise): one Slice node per output.
Status convertSplit(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    const Shape x = ctx.shapeOf(0);
    const int64_t axis = normalizeAxis(ctx.a.getInt("axis", 0), x.size());
    if (axis < 0) return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": axis out of range");
    const int64_t outputs = ctx.proto.output_size();
    std::vector<int64_t> sizes;
    if (ctx.opset() < 13) {
        sizes = ctx.a.getInts("split");
    } else {
        VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "split sizes"));
        if (ctx.input(1) >= 0) sizes = ctx.constant(1).toInt64s();
    }
    const int64_t num = ctx.a.getInt("num_outputs", 0);
    const int64_t dim = x[axis];
    if (sizes.empty()) {
        const int64_t parts = num > 0 ? num : outputs;
        const int64_t chunk = (dim + parts - 1) / parts;  // opset 18: the last part is smaller
        for (int64_t p = 0, left = dim; p < parts; ++p, left -= chunk)
            sizes.push_back(std::min(chunk, left));
    }
    int64_t total = 0;
    for (int64_t v : sizes) total += v;
    if (static_cast<int64_t>(sizes.size()) != outputs || total != dim)
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": split " + shapeToString(sizes) +
                                                         " for " + std::to_string(outputs) +
                                                         " outputs along an axis of " +
                                                         std::to_string(dim));
    VOXSEG_RETURN_IF_ERROR(ctx.a.checkAllKnown());
    ctx.emitted = true;
    int64_t start = 0;
    for (int64_t o = 0; o < outputs; ++o) {
        Node sl = ctx.subNode(OpKind::kSlice, {ctx.in[0]}, "part" + std::to_string(o));
        sl.slice_starts = {start};
        sl.slice_ends = {start + sizes[o]};
        sl.slice_axes = {axis};
        start += sizes[o];
        if (ctx.proto.output(static_cast<int>(o)).empty()) continue;
        VOXSEG_RETURN_IF_ERROR(ctx.s.emit(std::move(sl), ctx.proto.output(static_cast<int>(o))));
    }
    return Status::ok();
}

Status convertExpand(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "the target shape"));
    ctx.n.op = OpKind::kExpand;
    ctx.n.shape = ctx.constant(1).toInt64s();
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

Status convertTile(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "repeats"));
    ctx.n.op = OpKind::kTile;
    ctx.n.repeats = ctx.constant(1).toInt64s();
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

// Gather of activations by constant indices (qkv[0] in attention blocks): a scalar index is a
// Slice of one and a Reshape dropping the axis; an index list is one Slice when it is an
// arithmetic progression, else Slices joined by a Concat.
Status convertGather(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "the indices"));
    const Shape x = ctx.shapeOf(0);
    const int64_t axis = normalizeAxis(ctx.a.getInt("axis", 0), x.size());
    if (axis < 0) return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": axis out of range");
    VOXSEG_RETURN_IF_ERROR(ctx.a.checkAllKnown());
    const Tensor& it = ctx.constant(1);
    if (it.shape().size() > 1)
        return ctx.err(StatusCode::kUnsupported,
                       ctx.desc + ": indices of rank " + std::to_string(it.shape().size()) +
                           " (voxseg gathers activations by a scalar or a list)");
    std::vector<int64_t> idx = it.toInt64s();
    for (int64_t& i : idx) {
        if (i < 0) i += x[axis];
        if (i < 0 || i >= x[axis])
            return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": index out of range");
    }
    if (idx.empty()) return ctx.err(StatusCode::kUnsupported, ctx.desc + ": no indices");
    ctx.emitted = true;
    const bool scalar = it.shape().empty();
    const int64_t step = idx.size() > 1 ? idx[1] - idx[0] : 1;
    bool progression = step != 0;
    for (size_t k = 1; k < idx.size(); ++k) progression &= idx[k] - idx[k - 1] == step;
    auto slice = [&](int64_t first, int64_t count, int64_t st, const std::string& suffix) {
        Node sl = ctx.subNode(OpKind::kSlice, {ctx.in[0]}, suffix);
        sl.slice_starts = {first};
        const int64_t last = first + (count - 1) * st;
        sl.slice_ends = {st > 0 ? last + 1 : (last == 0 ? INT64_MIN : last - 1)};
        sl.slice_axes = {axis};
        sl.slice_steps = {st};
        return sl;
    };
    if (scalar) {
        VOXSEG_RETURN_IF_ERROR(ctx.s.emit(slice(idx[0], 1, 1, "slice"), ctx.tmpName("slice")));
        Node r = ctx.subNode(OpKind::kReshape, {ctx.s.idOf(ctx.tmpName("slice"))}, "squeeze");
        r.shape = x;
        r.shape.erase(r.shape.begin() + axis);
        // For any batch: the batch dim copied (0) when it stays first, inferred (-1) when the
        // gathered axis was the first ([3, B, ...] of a QKV split).
        if (!r.shape.empty()) r.shape[0] = axis > 0 ? 0 : -1;
        return ctx.s.emit(std::move(r), ctx.proto.output(0));
    }
    if (progression)
        return ctx.s.emit(slice(idx[0], static_cast<int64_t>(idx.size()), step, "slice"),
                          ctx.proto.output(0));
    Node cat = ctx.subNode(OpKind::kConcat, {}, "concat");
    cat.axis = axis;
    for (size_t k = 0; k < idx.size(); ++k) {
        const std::string name = ctx.tmpName("index" + std::to_string(k));
        VOXSEG_RETURN_IF_ERROR(ctx.s.emit(slice(idx[k], 1, 1, "index" + std::to_string(k)), name));
        cat.inputs.push_back(ctx.s.idOf(name));
    }
    return ctx.s.emit(std::move(cat), ctx.proto.output(0));
}

}  // namespace

void addShapeConverters(ConverterTable& t) {
    t["Identity"] = convertIdentity;
    t["Dropout"] = convertIdentity;
    t["Cast"] = convertCast;
    t["Reshape"] = convertReshape;
    t["Flatten"] = convertReshape;
    t["Squeeze"] = convertReshape;
    t["Unsqueeze"] = convertReshape;
    t["Transpose"] = convertTranspose;
    t["Slice"] = convertSlice;
    t["Pad"] = convertPad;
    t["Concat"] = convertConcat;
    t["Split"] = convertSplit;
    t["Expand"] = convertExpand;
    t["Tile"] = convertTile;
    t["Gather"] = convertGather;
}

}  // namespace voxseg::engine::onnx_detail
