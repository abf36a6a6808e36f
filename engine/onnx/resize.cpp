// Resize (opset 10-19 attributes, scales or sizes, opset-18 axes) and the older Upsample.
#include "engine/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {
namespace {

Status convertResize(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kResize;
    const Shape x = ctx.shapeOf(0);
    const std::string mode = ctx.a.getString("mode", "nearest");
    if (mode == "nearest")
        ctx.n.resize.mode = ResizeMode::kNearest;
    else if (mode == "linear" || mode == "bilinear" || mode == "trilinear")
        ctx.n.resize.mode = ResizeMode::kLinear;
    else
        return ctx.err(StatusCode::kUnsupported,
                       ctx.desc + ": mode '" + mode + "' (cubic is not supported)");
    std::vector<float> scales;
    std::vector<int64_t> sizes;
    if (op == "Upsample" || ctx.opset() < 11) {
        ctx.n.resize.coord = ResizeCoord::kAsymmetric;
        ctx.n.resize.nearest = NearestRounding::kFloor;
        if (ctx.a.has("scales")) {
            scales = ctx.a.getFloats("scales");
        } else {
            VOXSEG_RETURN_IF_ERROR(ctx.need(2));
            VOXSEG_RETURN_IF_ERROR(ctx.needConstant(1, "scales"));
            scales = ctx.g().constant(ctx.in[1]).toFloats();
        }
    } else {
        const std::string coord = ctx.a.getString("coordinate_transformation_mode", "half_pixel");
        if (coord == "half_pixel")
            ctx.n.resize.coord = ResizeCoord::kHalfPixel;
        else if (coord == "pytorch_half_pixel")
            ctx.n.resize.coord = ResizeCoord::kPytorchHalfPixel;
        else if (coord == "align_corners")
            ctx.n.resize.coord = ResizeCoord::kAlignCorners;
        else if (coord == "asymmetric")
            ctx.n.resize.coord = ResizeCoord::kAsymmetric;
        else
            return ctx.err(StatusCode::kUnsupported,
                           ctx.desc + ": coordinate_transformation_mode '" + coord + "'");
        const std::string nm = ctx.a.getString("nearest_mode", "round_prefer_floor");
        if (nm == "round_prefer_floor")
            ctx.n.resize.nearest = NearestRounding::kRoundPreferFloor;
        else if (nm == "round_prefer_ceil")
            ctx.n.resize.nearest = NearestRounding::kRoundPreferCeil;
        else if (nm == "floor")
            ctx.n.resize.nearest = NearestRounding::kFloor;
        else if (nm == "ceil")
            ctx.n.resize.nearest = NearestRounding::kCeil;
        else
            return ctx.err(StatusCode::kUnsupported, ctx.desc + ": nearest_mode '" + nm + "'");
        ctx.a.ignore({"cubic_coeff_a", "extrapolation_value"});
        if (ctx.a.getInt("exclude_outside", 0) != 0 || ctx.a.getInt("antialias", 0) != 0)
            return ctx.err(StatusCode::kUnsupported, ctx.desc + ": exclude_outside/antialias");
        if (ctx.a.getString("keep_aspect_ratio_policy", "stretch") != "stretch")
            return ctx.err(StatusCode::kUnsupported, ctx.desc + ": keep_aspect_ratio_policy");
        for (size_t k = 1; k < 4; ++k)
            VOXSEG_RETURN_IF_ERROR(ctx.needConstant(k, "roi/scales/sizes"));
        if (ctx.input(2) >= 0) scales = ctx.g().constant(ctx.in[2]).toFloats();
        if (ctx.input(3) >= 0) sizes = ctx.g().constant(ctx.in[3]).toInt64s();
        std::vector<int64_t> axes = ctx.a.getInts("axes");
        if (!axes.empty()) {  // opset 18: scales/sizes for the listed axes only
            std::vector<float> full_scales(x.size(), 1.0f);
            std::vector<int64_t> full_sizes = x;
            for (size_t k = 0; k < axes.size(); ++k) {
                int64_t ax = axes[k] < 0 ? axes[k] + static_cast<int64_t>(x.size()) : axes[k];
                if (ax < 0 || ax >= static_cast<int64_t>(x.size()))
                    return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": axes out of range");
                if (k < scales.size()) full_scales[ax] = scales[k];
                if (k < sizes.size()) full_sizes[ax] = sizes[k];
            }
            if (!scales.empty()) scales = full_scales;
            if (!sizes.empty()) sizes = full_sizes;
        }
    }
    if (!sizes.empty()) {
        if (sizes.size() != x.size())
            return ctx.err(StatusCode::kInvalidArgument,
                           ctx.desc + ": sizes do not match the rank");
        scales.clear();
        for (size_t i = 0; i < x.size(); ++i)
            scales.push_back(static_cast<float>(static_cast<double>(sizes[i]) / double(x[i])));
    }
    if (scales.size() != x.size())
        return ctx.err(StatusCode::kInvalidArgument,
                       ctx.desc + ": needs one scale per axis of " + shapeToString(x));
    if (scales[0] != 1.0f || scales[1] != 1.0f)
        return ctx.err(StatusCode::kUnsupported, ctx.desc + ": resizing batch or channel axes");
    ctx.n.resize.scales = scales;
    ctx.n.inputs = {ctx.in[0]};
    return Status::ok();
}

}  // namespace

void addResizeConverters(ConverterTable& t) {
    t["Resize"] = convertResize;
    t["Upsample"] = convertResize;
}

}  // namespace voxseg::engine::onnx_detail
