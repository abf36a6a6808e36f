#include "cuda/tensor_step.h"

#include <fmt/format.h>

namespace voxseg::cuda {

engine::Shape rowMajorStrides(const engine::Shape& shape) {
    engine::Shape strides(shape.size(), 1);
    for (size_t a = shape.size(); a-- > 1;) strides[a - 1] = strides[a] * shape[a];
    return strides;
}

TRef broadcastTo(const TRef& t, const engine::Shape& out) {
    TRef r = t;
    const size_t rank = out.size(), lead = rank - t.shape.size();
    r.shape = out;
    r.mod.assign(rank, 1);
    r.strides.assign(rank, 0);
    for (size_t a = 0; a < t.shape.size(); ++a) {
        r.mod[lead + a] = t.shape[a] == 1 ? 1 : t.mod[a];
        r.strides[lead + a] = t.shape[a] == 1 ? 0 : t.strides[a];
    }
    return r;
}

namespace {

Status attentionGemms(TensorStep& s, int64_t rows, cublasLtHandle_t lt, GemmMath math,
                      size_t workspace_bytes) {
    for (bool pv : {false, true}) {
        auto g = LtGemm::create(lt, attentionPlan(s, rows, pv), math, workspace_bytes);
        if (!g.isOk()) return g.status();
        s.gemms.push_back(std::move(g).value());
    }
    return Status::ok();
}

Status runAttention(const TensorStep& s, const TensorRunContext& ctx) {
    const auto* q = static_cast<const float*>(s.da.data);
    const auto* kt = static_cast<const float*>(s.db.data);
    auto* y = static_cast<float*>(s.dy.data);
    for (int64_t q0 = 0; q0 < s.tq; q0 += s.tile) {
        const int64_t rows = std::min(s.tile, s.tq - q0);
        const size_t g = rows == s.tile ? 0 : 2;  // tail tile: its own plans
        VOXSEG_RETURN_IF_ERROR(s.gemms[g].run(ctx.lt, q + q0 * s.dh, kt, nullptr, s.scratch_ptr,
                                              ctx.workspace, ctx.workspace_bytes, ctx.stream));
        VOXSEG_RETURN_IF_ERROR(launchAttentionSoftmax(s.scratch_ptr, s.batch, rows, s.tk, q0, s.tq,
                                                      s.scale, s.dc, s.dmask, ctx.stream));
        VOXSEG_RETURN_IF_ERROR(s.gemms[g + 1].run(ctx.lt, s.scratch_ptr, s.v_ptr, nullptr,
                                                  y + q0 * s.dv, ctx.workspace, ctx.workspace_bytes,
                                                  ctx.stream));
    }
    return Status::ok();
}

}  // namespace

GemmPlan attentionPlan(const TensorStep& s, int64_t rows, bool pv) {
    const int64_t f = sizeof(float);
    GemmPlan p;
    if (!pv) {  // scores[b] (rows x Tk) = Q[b][q0:q0+rows] (rows x D) * Kt[b] (D x Tk)
        p.m = rows, p.k = s.dh, p.n = s.tk, p.batch = s.batch;
        p.lda = s.dh, p.ldb = s.tk, p.ldd = s.tk;
        p.stride_a = s.tq * s.dh, p.stride_b = s.dh * s.tk, p.stride_d = rows * s.tk;
        p.align_a = gemmAlignment(s.da.data, {p.stride_a * f, s.tile * s.dh * f});
        p.align_b = gemmAlignment(s.db.data, {p.stride_b * f});
        p.align_d = p.align_c = gemmAlignment(s.scratch_ptr, {p.stride_d * f});
    } else {  // Y[b][q0:q0+rows] (rows x Dv) = P[b] (rows x Tk) * V[b] (Tk x Dv)
        p.m = rows, p.k = s.tk, p.n = s.dv, p.batch = s.batch;
        p.lda = s.tk, p.ldb = s.dv, p.ldd = s.dv;
        p.stride_a = rows * s.tk, p.stride_b = s.tk * s.dv, p.stride_d = s.tq * s.dv;
        p.align_a = gemmAlignment(s.scratch_ptr, {p.stride_a * f});
        p.align_b = gemmAlignment(s.v_ptr, {p.stride_b * f});
        p.align_d = p.align_c = gemmAlignment(s.dy.data, {p.stride_d * f, s.tile * s.dv * f});
    }
    return p;
}

Status planGemms(TensorStep& s, cublasLtHandle_t lt, GemmMath math, size_t workspace_bytes) {
    s.gemms.clear();
    if (s.kind == TensorStep::Kind::kMatMul) {
        const int64_t f = sizeof(float);
        GemmPlan p = s.gemm;
        p.bias = static_cast<const float*>(s.dc.data);
        p.accumulate = s.dres.data != nullptr;
        p.align_a = gemmAlignment(s.da.data, {p.stride_a * f});
        p.align_b = gemmAlignment(s.db.data, {p.stride_b * f});
        p.align_d = gemmAlignment(s.dy.data, {p.stride_d * f});
        p.align_c = p.accumulate ? gemmAlignment(s.dres.data, {p.stride_d * f}) : p.align_d;
        auto g = LtGemm::create(lt, p, math, workspace_bytes);
        if (!g.isOk()) return g.status();
        s.gemms.push_back(std::move(g).value());
        return Status::ok();
    }
    if (s.kind != TensorStep::Kind::kAttention) return Status::ok();
    VOXSEG_RETURN_IF_ERROR(attentionGemms(s, s.tile, lt, math, workspace_bytes));
    if (s.tq % s.tile != 0)
        VOXSEG_RETURN_IF_ERROR(attentionGemms(s, s.tq % s.tile, lt, math, workspace_bytes));
    return Status::ok();
}

Status runTensorStep(const TensorStep& s, const TensorRunContext& ctx) {
    using Kind = TensorStep::Kind;
    switch (s.kind) {
        case Kind::kCopy:
            return launchCopy(s.dy, s.da, ctx.stream);
        case Kind::kFill:
            return launchFill(s.dy, s.value, ctx.stream);
        case Kind::kEltwise: {
            EltwiseArgs e;
            e.y = s.dy;
            e.a = s.da;
            e.b = s.db;
            e.c = s.dc;
            e.op = s.op;
            e.alpha = s.alpha;
            e.lo = s.lo;
            e.hi = s.hi;
            return launchEltwise(e, ctx.stream);
        }
        case Kind::kRotary:
            return launchRotary(static_cast<const float*>(s.da.data),
                                static_cast<float*>(s.dy.data), s.dy.numel(), s.cols,
                                static_cast<const float*>(s.db.data),
                                static_cast<const float*>(s.dc.data), s.b.numel(), ctx.stream);
        case Kind::kLayerNorm: {
            RowView x = s.x_rows, y = s.y_rows;
            x.data = s.da.data;
            x.type = s.da.type;
            y.data = s.dy.data;
            y.type = s.dy.type;
            return launchLayerNorm(x, y, s.cols, static_cast<const float*>(s.db.data),
                                   static_cast<const float*>(s.dc.data), s.epsilon, ctx.stream);
        }
        case Kind::kSoftmax:
            return launchSoftmaxAxis(static_cast<const float*>(s.da.data),
                                     static_cast<float*>(s.dy.data), s.outer, s.len, s.inner,
                                     ctx.stream);
        case Kind::kReduce:
            return launchReduce(s.dy, s.da, s.reduce, ctx.stream);
        case Kind::kPool: {
            PoolArgs p = s.pool;
            p.x = s.da;
            p.y = s.dy;
            return launchPool(p, ctx.stream);
        }
        case Kind::kMatMul:
            return s.gemms.at(0).run(
                ctx.lt, static_cast<const float*>(s.da.data), static_cast<const float*>(s.db.data),
                static_cast<const float*>(s.dres.data), static_cast<float*>(s.dy.data),
                ctx.workspace, ctx.workspace_bytes, ctx.stream);
        case Kind::kAttention:
            return runAttention(s, ctx);
    }
    return internalError("unknown tensor step");
}

}  // namespace voxseg::cuda
