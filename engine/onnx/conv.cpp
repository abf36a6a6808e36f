// Conv and ConvTranspose (1D-3D, groups, auto_pad, output_shape), and the window attribute
// helpers the pools share.
#include "engine/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {

Status readWindow(Attrs& a, size_t sr, const std::vector<int64_t>& kernel_default, WindowAttrs& w) {
    w.kernel = a.getInts("kernel_shape", kernel_default);
    w.strides = a.getInts("strides", std::vector<int64_t>(sr, 1));
    w.dilations = a.getInts("dilations", std::vector<int64_t>(sr, 1));
    const std::vector<int64_t> pads = a.getInts("pads", std::vector<int64_t>(2 * sr, 0));
    w.auto_pad = a.getString("auto_pad", "NOTSET");
    if (w.kernel.size() != sr || w.strides.size() != sr || w.dilations.size() != sr ||
        pads.size() != 2 * sr)
        return invalidArgument(a.desc() + ": kernel_shape/strides/dilations/pads do not match " +
                               std::to_string(sr) + " spatial axes");
    for (size_t i = 0; i < sr; ++i)
        if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0 || pads[i] < 0 ||
            pads[sr + i] < 0)
            return invalidArgument(a.desc() +
                                   ": non-positive kernel/stride/dilation or negative pad");
    w.pads_begin.assign(pads.begin(), pads.begin() + sr);
    w.pads_end.assign(pads.begin() + sr, pads.end());
    if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && w.auto_pad != "SAME_UPPER" &&
        w.auto_pad != "SAME_LOWER")
        return unsupported(a.desc() + ": auto_pad '" + w.auto_pad + "'");
    return Status::ok();
}

// Resolves auto_pad for a forward window op (Conv, pools) on input spatial dims `in`.
void applyAutoPad(WindowAttrs& w, const Shape& x) {
    if (w.auto_pad == "NOTSET") return;
    const size_t sr = w.kernel.size();
    for (size_t i = 0; i < sr; ++i) {
        if (w.auto_pad == "VALID") {
            w.pads_begin[i] = w.pads_end[i] = 0;
            continue;
        }
        const int64_t in = x[2 + i];
        const int64_t out = (in + w.strides[i] - 1) / w.strides[i];
        const int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
        const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + span - in);
        const int64_t small = total / 2;
        w.pads_begin[i] = w.auto_pad == "SAME_UPPER" ? small : total - small;
        w.pads_end[i] = total - w.pads_begin[i];
    }
}

namespace {

Status convertConv(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    const bool transpose = op == "ConvTranspose";
    ctx.n.op = transpose ? OpKind::kConvTranspose : OpKind::kConv;
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "the weight"));
    VOXSEG_RETURN_IF_ERROR(ctx.needConstant(2, "the bias"));
    const Shape& x = ctx.shapeOf(0);
    const Shape& w = ctx.shapeOf(1);
    if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
        return ctx.err(StatusCode::kUnsupported,
                       ctx.desc + ": input " + shapeToString(x) + " / weight " + shapeToString(w) +
                           ": voxseg runs 1D-3D convolutions on NC(D)(H)W tensors");
    const size_t sr = x.size() - 2;
    WindowAttrs wa;
    VOXSEG_RETURN_IF_ERROR(readWindow(ctx.a, sr, Shape(w.begin() + 2, w.end()), wa));
    if (wa.kernel != Shape(w.begin() + 2, w.end()))
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": kernel_shape " +
                                                         shapeToString(wa.kernel) + " but weight " +
                                                         shapeToString(w));
    ctx.n.conv.group = ctx.a.getInt("group", 1);
    if (ctx.n.conv.group <= 0)
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": group must be positive");
    if (transpose) {
        ctx.n.conv.output_padding = ctx.a.getInts("output_padding", std::vector<int64_t>(sr, 0));
        const std::vector<int64_t> output_shape = ctx.a.getInts("output_shape");
        if (ctx.n.conv.output_padding.size() != sr)
            return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": output_padding length");
        if (!output_shape.empty() || (wa.auto_pad != "NOTSET" && wa.auto_pad != "VALID")) {
            // Pads that give the requested (or SAME: input*stride) output size.
            std::vector<int64_t> target = output_shape;
            if (target.size() == sr + 2) target.erase(target.begin(), target.begin() + 2);
            if (target.empty())
                for (size_t i = 0; i < sr; ++i) target.push_back(x[2 + i] * wa.strides[i]);
            if (target.size() != sr)
                return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": output_shape length");
            for (size_t i = 0; i < sr; ++i) {
                const int64_t total = wa.strides[i] * (x[2 + i] - 1) +
                                      ctx.n.conv.output_padding[i] +
                                      (wa.kernel[i] - 1) * wa.dilations[i] + 1 - target[i];
                if (total < 0) {  // output larger than the kernel reaches: extra output_padding
                    ctx.n.conv.output_padding[i] -= total;
                    wa.pads_begin[i] = wa.pads_end[i] = 0;
                    continue;
                }
                const bool upper =
                    wa.auto_pad == "SAME_UPPER";  // ONNX: NOTSET pads like SAME_LOWER
                wa.pads_begin[i] = upper ? total / 2 : total - total / 2;
                wa.pads_end[i] = total - wa.pads_begin[i];
            }
        } else if (wa.auto_pad == "VALID") {
            std::fill(wa.pads_begin.begin(), wa.pads_begin.end(), 0);
            std::fill(wa.pads_end.begin(), wa.pads_end.end(), 0);
        }
    } else {
        applyAutoPad(wa, x);
    }
    ctx.n.conv.spatial_rank = static_cast<int>(sr);
    ctx.n.conv.kernel = wa.kernel;
    ctx.n.conv.strides = wa.strides;
    ctx.n.conv.dilations = wa.dilations;
    ctx.n.conv.pads_begin = wa.pads_begin;
    ctx.n.conv.pads_end = wa.pads_end;
    ctx.n.conv.in_channels = transpose ? w[0] : w[1] * ctx.n.conv.group;
    ctx.n.conv.out_channels = transpose ? w[1] * ctx.n.conv.group : w[0];
    ctx.n.conv.has_bias = ctx.input(2) >= 0;
    ctx.n.inputs.resize(ctx.n.conv.has_bias ? 3 : 2);
    return Status::ok();
}

}  // namespace

void addConvConverters(ConverterTable& t) {
    t["Conv"] = convertConv;
    t["ConvTranspose"] = convertConv;
}

}  // namespace voxseg::engine::onnx_detail
