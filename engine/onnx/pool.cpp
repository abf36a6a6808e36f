// MaxPool, AveragePool, GlobalAveragePool.
#include "engine/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::onnx_detail {
namespace {

Status convertPool(NodeContext& ctx) {
    [[maybe_unused]] const std::string& op = ctx.proto.op_type();
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = op == "MaxPool" ? OpKind::kMaxPool : OpKind::kAveragePool;
    const Shape x = ctx.shapeOf(0);
    if (x.size() < 3) return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": input rank < 3");
    WindowAttrs wa;
    VOXSEG_RETURN_IF_ERROR(readWindow(ctx.a, x.size() - 2, {}, wa));
    if (Status st = applyAutoPad(wa, x); !st.isOk())
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": " + st.message());
    ctx.n.pool.kernel = wa.kernel;
    ctx.n.pool.strides = wa.strides;
    ctx.n.pool.dilations = wa.dilations;
    ctx.n.pool.pads_begin = wa.pads_begin;
    ctx.n.pool.pads_end = wa.pads_end;
    ctx.n.pool.ceil_mode = ctx.a.getInt("ceil_mode", 0) != 0;
    ctx.n.pool.count_include_pad = ctx.a.getInt("count_include_pad", 0) != 0;
    if (ctx.a.getInt("storage_order", 0) != 0)
        return ctx.err(StatusCode::kUnsupported, ctx.desc + ": storage_order=1");
    ctx.dropExtraOutputs("pooling indices");
    return Status::ok();
}

Status convertGlobalAveragePool(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(1));
    ctx.n.op = OpKind::kGlobalAveragePool;
    return Status::ok();
}

}  // namespace

void addPoolConverters(ConverterTable& t) {
    t["MaxPool"] = convertPool;
    t["AveragePool"] = convertPool;
    t["GlobalAveragePool"] = convertGlobalAveragePool;
}

}  // namespace voxseg::engine::onnx_detail
