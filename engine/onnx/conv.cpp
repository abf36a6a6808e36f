// Conv and ConvTranspose (1D-3D, groups, auto_pad, output_shape), and the window attribute
// helpers the pools share.
#include "engine/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {
namespace {

// The largest kernel, stride, dilation, pad or output_padding voxseg accepts (a 3D network uses
// single digits): with it and axes up to 2^40, every window formula below fits in 128 bits and
// its result is checked to fit in int64.
constexpr int64_t kMaxWindowAttr = int64_t{1} << 31;
using Wide = __int128;

bool fitsInt64(Wide v) {
    return v >= Wide(std::numeric_limits<int64_t>::min()) &&
           v <= Wide(std::numeric_limits<int64_t>::max());
}

}  // namespace

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
    for (const std::vector<int64_t>* v : std::initializer_list<const std::vector<int64_t>*>{
             &w.kernel, &w.strides, &w.dilations, &pads})
        for (int64_t x : *v)
            if (x > kMaxWindowAttr)
                return unsupported(a.desc() + ": kernel_shape/strides/dilations/pads value " +
                                   std::to_string(x) + " > " + std::to_string(kMaxWindowAttr) +
                                   " (corrupt or hostile model)");
    w.pads_begin.assign(pads.begin(), pads.begin() + sr);
    w.pads_end.assign(pads.begin() + sr, pads.end());
    if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && w.auto_pad != "SAME_UPPER" &&
        w.auto_pad != "SAME_LOWER")
        return unsupported(a.desc() + ": auto_pad '" + w.auto_pad + "'");
    return Status::ok();
}

// Resolves auto_pad for a forward window op (Conv, pools) on input spatial dims `in`.
Status applyAutoPad(WindowAttrs& w, const Shape& x) {
    if (w.auto_pad == "NOTSET") return Status::ok();
    const size_t sr = w.kernel.size();
    if (x.size() < 2 + sr) return invalidArgument("auto_pad on input " + shapeToString(x));
    for (size_t i = 0; i < sr; ++i) {
        if (w.auto_pad == "VALID") {
            w.pads_begin[i] = w.pads_end[i] = 0;
            continue;
        }
        const Wide in = x[2 + i];
        const Wide out = (in + w.strides[i] - 1) / w.strides[i];
        const Wide span = Wide(w.kernel[i] - 1) * w.dilations[i] + 1;
        const Wide total = std::max<Wide>(0, (out - 1) * w.strides[i] + span - in);
        if (!fitsInt64(total))
            return invalidArgument("auto_pad " + w.auto_pad + " pads beyond int64 on input " +
                                   shapeToString(x));
        const int64_t small = static_cast<int64_t>(total / 2);
        w.pads_begin[i] = w.auto_pad == "SAME_UPPER" ? small : static_cast<int64_t>(total) - small;
        w.pads_end[i] = static_cast<int64_t>(total) - w.pads_begin[i];
    }
    return Status::ok();
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
        for (int64_t v : ctx.n.conv.output_padding)
            if (v < 0 || v > kMaxWindowAttr)
                return ctx.err(StatusCode::kInvalidArgument,
                               ctx.desc + ": output_padding " + std::to_string(v) + " outside 0.." +
                                   std::to_string(kMaxWindowAttr));
        for (int64_t v : output_shape)
            if (v < 1 || v > (int64_t{1} << 40))
                return ctx.err(
                    StatusCode::kInvalidArgument,
                    ctx.desc + ": output_shape entry " + std::to_string(v) + " outside 1..2^40");
        if (!output_shape.empty() || (wa.auto_pad != "NOTSET" && wa.auto_pad != "VALID")) {
            // Pads that give the requested (or SAME: input*stride) output size.
            std::vector<int64_t> target = output_shape;
            if (target.size() == sr + 2) target.erase(target.begin(), target.begin() + 2);
            if (target.empty())
                for (size_t i = 0; i < sr; ++i) {
                    const Wide t = Wide(x[2 + i]) * wa.strides[i];
                    if (!fitsInt64(t))
                        return ctx.err(StatusCode::kInvalidArgument,
                                       ctx.desc + ": SAME output beyond int64");
                    target.push_back(static_cast<int64_t>(t));
                }
            if (target.size() != sr)
                return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": output_shape length");
            for (size_t i = 0; i < sr; ++i) {
                const Wide wide = Wide(wa.strides[i]) * (Wide(x[2 + i]) - 1) +
                                  ctx.n.conv.output_padding[i] +
                                  Wide(wa.kernel[i] - 1) * wa.dilations[i] + 1 - target[i];
                if (!fitsInt64(wide) || !fitsInt64(Wide(ctx.n.conv.output_padding[i]) - wide))
                    return ctx.err(StatusCode::kInvalidArgument,
                                   ctx.desc + ": output_shape pads beyond int64");
                const int64_t total = static_cast<int64_t>(wide);
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
    } else if (Status st = applyAutoPad(wa, x); !st.isOk()) {
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": " + st.message());
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
