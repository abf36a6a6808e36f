// MatMul (numpy batched broadcasting), Gemm and the two-operand Einsum forms attention exporters
// emit. Gemm and Einsum are lowered here into Transpose / Reshape / MatMul / Mul / Add nodes;
// transposes and scales of constant operands fold into new constants (ImportState::emit).
#include "engine/onnx/converter.h"

#include <algorithm>
#include <map>

namespace voxseg::engine::onnx_detail {
namespace {

// Emits `node` as an intermediate value named after the ONNX node; returns its id.
Result<ValueId> emitTmp(NodeContext& ctx, Node node, const std::string& suffix) {
    const std::string name = ctx.tmpName(suffix);
    VOXSEG_RETURN_IF_ERROR(ctx.s.emit(std::move(node), name));
    return ctx.s.idOf(name);
}

// A Reshape target that keeps the batch dim copies it (0), so the graph works for any batch.
Shape batchFree(Shape target, const Shape& input) {
    if (!target.empty() && !input.empty() && target[0] == input[0]) target[0] = 0;
    return target;
}

Result<ValueId> reshapeTo(NodeContext& ctx, ValueId v, Shape target, const std::string& suffix) {
    if (ctx.g().values[v].shape == target) return v;
    Node r = ctx.subNode(OpKind::kReshape, {v}, suffix);
    r.shape = batchFree(std::move(target), ctx.g().values[v].shape);
    return emitTmp(ctx, std::move(r), suffix);
}

Result<ValueId> transposeBy(NodeContext& ctx, ValueId v, std::vector<int64_t> perm,
                            const std::string& suffix) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
    if (identity) return v;
    Node t = ctx.subNode(OpKind::kTranspose, {v}, suffix);
    t.perm = std::move(perm);
    return emitTmp(ctx, std::move(t), suffix);
}

// MatMul; rank-1 operands get the 1 numpy prepends / appends, removed again from the result.
Status convertMatMul(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    ctx.n.op = OpKind::kMatMul;
    const Shape a = ctx.shapeOf(0), b = ctx.shapeOf(1);
    if (a.empty() || b.empty())
        return ctx.err(StatusCode::kInvalidArgument, ctx.desc + ": scalar operand");
    if (a.size() >= 2 && b.size() >= 2) return Status::ok();
    ValueId va = ctx.in[0], vb = ctx.in[1];
    if (a.size() == 1) {
        VOXSEG_ASSIGN_OR_RETURN(va, reshapeTo(ctx, va, {1, a[0]}, "a_row"));
    }
    if (b.size() == 1) {
        VOXSEG_ASSIGN_OR_RETURN(vb, reshapeTo(ctx, vb, {b[0], 1}, "b_col"));
    }
    VOXSEG_RETURN_IF_ERROR(ctx.a.checkAllKnown());
    VOXSEG_ASSIGN_OR_RETURN(ValueId y, emitTmp(ctx, ctx.subNode(OpKind::kMatMul, {va, vb}), "mm"));
    Shape ys = ctx.g().values[y].shape;
    if (a.size() == 1) ys.erase(ys.end() - 2);
    if (b.size() == 1) ys.pop_back();
    Node r = ctx.subNode(OpKind::kReshape, {y}, "squeeze");
    r.shape = batchFree(ys, ctx.g().values[y].shape);
    ctx.emitted = true;
    return ctx.s.emit(std::move(r), ctx.proto.output(0));
}

// Gemm: alpha * A' B' + beta * C (A', B' optionally transposed; C broadcast).
Status convertGemm(NodeContext& ctx) {
    VOXSEG_RETURN_IF_ERROR(ctx.need(2));
    const float alpha = ctx.a.getFloat("alpha", 1.0f), beta = ctx.a.getFloat("beta", 1.0f);
    const bool ta = ctx.a.getInt("transA", 0) != 0, tb = ctx.a.getInt("transB", 0) != 0;
    VOXSEG_RETURN_IF_ERROR(ctx.a.checkAllKnown());
    if (ctx.shapeOf(0).size() != 2 || ctx.shapeOf(1).size() != 2)
        return ctx.err(StatusCode::kInvalidArgument,
                       ctx.desc + ": A " + shapeToString(ctx.shapeOf(0)) + " and B " +
                           shapeToString(ctx.shapeOf(1)) + " must be 2-D");
    ValueId a = ctx.in[0], b = ctx.in[1];
    if (ta) {
        VOXSEG_ASSIGN_OR_RETURN(a, transposeBy(ctx, a, {1, 0}, "a_t"));
    }
    if (tb) {
        VOXSEG_ASSIGN_OR_RETURN(b, transposeBy(ctx, b, {1, 0}, "b_t"));
    }
    const bool has_c = ctx.input(2) >= 0 && beta != 0.0f;
    const bool scaled = alpha != 1.0f;
    ctx.emitted = true;
    Node mm = ctx.subNode(OpKind::kMatMul, {a, b}, "matmul");
    if (!scaled && !has_c) return ctx.s.emit(std::move(mm), ctx.proto.output(0));
    VOXSEG_ASSIGN_OR_RETURN(ValueId y, emitTmp(ctx, std::move(mm), "matmul"));
    if (scaled) {
        const ValueId k =
            ctx.s.constantValue(ctx.tmpName("alpha"), Tensor::fromFloats({}, {alpha}));
        Node mul = ctx.subNode(OpKind::kMul, {y, k}, "alpha");
        if (!has_c) return ctx.s.emit(std::move(mul), ctx.proto.output(0));
        VOXSEG_ASSIGN_OR_RETURN(y, emitTmp(ctx, std::move(mul), "alpha"));
    }
    ValueId c = ctx.in[2];
    if (beta != 1.0f) {
        const ValueId k = ctx.s.constantValue(ctx.tmpName("beta"), Tensor::fromFloats({}, {beta}));
        VOXSEG_ASSIGN_OR_RETURN(c, emitTmp(ctx, ctx.subNode(OpKind::kMul, {c, k}, "beta"), "beta"));
    }
    return ctx.s.emit(ctx.subNode(OpKind::kAdd, {y, c}, "bias"), ctx.proto.output(0));
}

// Einsum with one or two operands and no ellipsis or repeated index within an operand: two
// operands become transposes to [batch, m, k] x [batch, k, n], one MatMul, and a transpose to
// the output order ("bhid,bhjd->bhij", "bhij,bhjd->bhid", "bnd,md->bnm", ...); one operand
// must be a permutation ("ij->ji").
Status convertEinsum(NodeContext& ctx) {
    const std::string eq_raw = ctx.a.getString("equation", "");
    VOXSEG_RETURN_IF_ERROR(ctx.a.checkAllKnown());
    std::string eq;
    for (char c : eq_raw)
        if (c != ' ') eq += c;
    auto bad = [&](const std::string& why) {
        return ctx.err(StatusCode::kUnsupported,
                       ctx.desc + ": equation '" + eq_raw + "': " + why +
                           " (voxseg runs one- and two-operand contractions without '...' or "
                           "repeated indices)");
    };
    const size_t arrow = eq.find("->");
    if (arrow == std::string::npos) return bad("no explicit output ('->')");
    if (eq.find("...") != std::string::npos) return bad("ellipsis");
    const std::string out = eq.substr(arrow + 2);
    std::vector<std::string> terms;
    for (size_t start = 0;;) {
        const size_t comma = eq.find(',', start);
        const size_t end = std::min(comma, arrow);
        terms.push_back(eq.substr(start, end - start));
        if (comma == std::string::npos || comma > arrow) break;
        start = comma + 1;
    }
    if (terms.size() != ctx.in.size() || terms.empty() || terms.size() > 2)
        return bad(std::to_string(terms.size()) + " terms for " + std::to_string(ctx.in.size()) +
                   " inputs");
    VOXSEG_RETURN_IF_ERROR(ctx.need(terms.size()));
    std::map<char, int64_t> size;
    for (size_t t = 0; t < terms.size(); ++t) {
        const Shape& s = ctx.shapeOf(t);
        if (s.size() != terms[t].size())
            return bad("term '" + terms[t] + "' vs rank " + std::to_string(s.size()));
        for (size_t i = 0; i < s.size(); ++i) {
            const char c = terms[t][i];
            if (terms[t].find(c) != i) return bad("repeated index '" + std::string(1, c) + "'");
            if (size.count(c) && size[c] != s[i])
                return bad("index '" + std::string(1, c) + "' has sizes " +
                           std::to_string(size[c]) + " and " + std::to_string(s[i]));
            size[c] = s[i];
        }
    }
    for (char c : out)
        if (!size.count(c)) return bad("output index '" + std::string(1, c) + "' not in inputs");
    auto pos = [](const std::string& s, char c) { return static_cast<int64_t>(s.find(c)); };
    ctx.emitted = true;
    if (terms.size() == 1) {
        if (terms[0].size() != out.size()) return bad("a one-operand reduction");
        std::vector<int64_t> perm;
        for (char c : out) perm.push_back(pos(terms[0], c));
        Node t = ctx.subNode(OpKind::kTranspose, {ctx.in[0]});
        t.perm = perm;
        return ctx.s.emit(std::move(t), ctx.proto.output(0));
    }
    const std::string& ta = terms[0];
    const std::string& tb = terms[1];
    std::string batch, m, n, k;
    for (char c : ta) {
        const bool in_b = tb.find(c) != std::string::npos, in_o = out.find(c) != std::string::npos;
        if (in_b && in_o)
            batch += c;
        else if (in_b)
            k += c;
        else if (in_o)
            m += c;
        else
            return bad("index '" + std::string(1, c) + "' summed within one operand");
    }
    for (char c : tb) {
        const bool in_a = ta.find(c) != std::string::npos, in_o = out.find(c) != std::string::npos;
        if (in_a) continue;
        if (in_o)
            n += c;
        else
            return bad("index '" + std::string(1, c) + "' summed within one operand");
    }
    auto prod = [&](const std::string& s) {
        int64_t p = 1;
        for (char c : s) p *= size[c];
        return p;
    };
    auto permOf = [&](const std::string& term, const std::string& order) {
        std::vector<int64_t> p;
        for (char c : order) p.push_back(pos(term, c));
        return p;
    };
    Shape batch_dims;
    for (char c : batch) batch_dims.push_back(size[c]);
    // A -> [batch, m, k] -> [batch..., M, K]; B -> [batch, k, n] -> [batch..., K, N].
    VOXSEG_ASSIGN_OR_RETURN(ValueId a,
                            transposeBy(ctx, ctx.in[0], permOf(ta, batch + m + k), "a_t"));
    Shape as = batch_dims;
    as.push_back(prod(m));
    as.push_back(prod(k));
    VOXSEG_ASSIGN_OR_RETURN(a, reshapeTo(ctx, a, as, "a_2d"));
    VOXSEG_ASSIGN_OR_RETURN(ValueId b,
                            transposeBy(ctx, ctx.in[1], permOf(tb, batch + k + n), "b_t"));
    Shape bs = batch_dims;
    bs.push_back(prod(k));
    bs.push_back(prod(n));
    VOXSEG_ASSIGN_OR_RETURN(b, reshapeTo(ctx, b, bs, "b_2d"));
    const std::string natural = batch + m + n;
    Shape ys = batch_dims;
    for (char c : m + n) ys.push_back(size[c]);
    const std::vector<int64_t> out_perm = permOf(natural, out);
    bool identity = true;
    for (size_t i = 0; i < out_perm.size(); ++i) identity &= out_perm[i] == int64_t(i);
    Node mm = ctx.subNode(OpKind::kMatMul, {a, b}, "matmul");
    const bool reshape = m.size() != 1 || n.size() != 1;
    if (!reshape && identity) return ctx.s.emit(std::move(mm), ctx.proto.output(0));
    VOXSEG_ASSIGN_OR_RETURN(ValueId y, emitTmp(ctx, std::move(mm), "matmul"));
    if (reshape) {
        if (identity) {
            Node r = ctx.subNode(OpKind::kReshape, {y}, "unflatten");
            r.shape = batchFree(ys, ctx.g().values[y].shape);
            return ctx.s.emit(std::move(r), ctx.proto.output(0));
        }
        VOXSEG_ASSIGN_OR_RETURN(y, reshapeTo(ctx, y, ys, "unflatten"));
    }
    Node t = ctx.subNode(OpKind::kTranspose, {y}, "out_t");
    t.perm = out_perm;
    return ctx.s.emit(std::move(t), ctx.proto.output(0));
}

}  // namespace

void addMatMulConverters(ConverterTable& t) {
    t["MatMul"] = convertMatMul;
    t["Gemm"] = convertGemm;
    t["Einsum"] = convertEinsum;
}

}  // namespace voxseg::engine::onnx_detail
