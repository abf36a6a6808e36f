// The CUDA backend's tensor-op converters (cuda_planner.h): one lowering per op family of the
// transformer layers, each turning a node into TensorSteps (tensor_step.h). What an op needs that
// is not here is refused by tensorOpSupported, naming the node and the reason.
#include "cuda/cuda_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace voxseg::cuda::planning {

using engine::ActivationKind;
using engine::PadAttrs;
using math::EltOp;

namespace {

constexpr size_t kAttentionScoreBytes = size_t(64) << 20;  // scores of one query tile

int64_t normAxis(int64_t axis, size_t rank) { return axis < 0 ? axis + int64_t(rank) : axis; }

int64_t product(const Shape& s, size_t begin, size_t end) {
    int64_t p = 1;
    for (size_t i = begin; i < end; ++i) p *= s[i];
    return p;
}

// Row-major float32 (axes of size 1 ignored), so that it can be aliased or handed to cuBLASLt.
bool isRowMajor(const TRef& t) {
    if (t.type != StorageType::kFloat32) return false;
    int64_t expect = 1;
    for (size_t a = t.shape.size(); a-- > 0;) {
        if (t.shape[a] == 1) continue;
        if (t.mod[a] != t.shape[a] || t.strides[a] != expect) return false;
        expect *= t.shape[a];
    }
    return true;
}

TRef reshaped(const TRef& packed, const Shape& shape) {
    TRef r = packed;
    r.shape = shape;
    r.mod = shape;
    r.strides = rowMajorStrides(shape);
    return r;
}

Result<EltOp> eltOpOf(const Node& node) {
    if (const auto fn = engine::unaryFnOf(node.op)) return math::unaryMathOp(*fn);
    switch (node.op) {
        case OpKind::kIdentity:
            return EltOp::kCopy;
        case OpKind::kAdd:
            return EltOp::kAdd;
        case OpKind::kSub:
            return EltOp::kSub;
        case OpKind::kMul:
            return EltOp::kMul;
        case OpKind::kDiv:
            return EltOp::kDiv;
        case OpKind::kPRelu:
            return EltOp::kPRelu;
        case OpKind::kWhere:
            return EltOp::kWhere;
        case OpKind::kGelu:
            return node.gelu_tanh ? EltOp::kGeluTanh : EltOp::kGeluExact;
        case OpKind::kSilu:
            return EltOp::kSilu;
        case OpKind::kRelu:
            return EltOp::kRelu;
        case OpKind::kLeakyRelu:
            return EltOp::kLeakyRelu;
        case OpKind::kSigmoid:
            return EltOp::kSigmoid;
        case OpKind::kTanh:
            return EltOp::kTanh;
        case OpKind::kClip:
            return EltOp::kClip;
        default:
            return nodeError(node, StatusCode::kInternal, "not an element-wise op");
    }
}

}  // namespace

bool isTensorOp(OpKind op) {
    switch (op) {
        case OpKind::kConv:
        case OpKind::kConvTranspose:
        case OpKind::kInstanceNorm:
        case OpKind::kBatchNorm:
        case OpKind::kGroupNorm:
        case OpKind::kResize:
            return false;
        default:
            return true;
    }
}

Status tensorOpSupported(const Graph& g, const Node& node) {
    auto refuse = [&](const std::string& why) {
        return nodeError(node, StatusCode::kUnsupported, why + " (use --device cpu)");
    };
    for (ValueId id : node.inputs)
        if (id >= 0 && g.values[id].shape.size() > size_t(kMaxTensorRank))
            return refuse(fmt::format("rank {} exceeds the CUDA tensor kernels' {}",
                                      g.values[id].shape.size(), kMaxTensorRank));
    for (ValueId id : node.outputs)
        if (g.values[id].shape.size() > size_t(kMaxTensorRank))
            return refuse("output rank exceeds the CUDA tensor kernels' limit");
    auto constant = [&](size_t i) {
        return i < node.inputs.size() && node.inputs[i] >= 0 && g.isConstant(node.inputs[i]);
    };
    // Every unary op lowers to one element-wise step (eltOpOf).
    if (engine::opCategory(node.op) == engine::OpCategory::kUnaryElementwise) return Status::ok();
    switch (node.op) {
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv:
            if (constant(0) && constant(1)) return refuse("constant-only op");
            return Status::ok();
        case OpKind::kPad:
            if (node.pad.mode != PadAttrs::Mode::kConstant)
                return refuse("only constant padding runs as a tensor op on CUDA");
            for (size_t a = 0; a < node.pad.pads_begin.size(); ++a)
                if (node.pad.pads_begin[a] < 0 || node.pad.pads_end[a] < 0)
                    return refuse("negative pads (cropping)");
            return Status::ok();
        case OpKind::kMatMul:
            if (g.values[node.inputs[0]].shape.size() < 2 ||
                g.values[node.inputs[1]].shape.size() < 2)
                return refuse("matrix products of 1-D operands");
            if (node.inputs.size() > 2 && node.inputs[2] >= 0 && !constant(2))
                return refuse("a run-time bias");
            return Status::ok();
        case OpKind::kAttention: {
            const Shape& q = g.values[node.inputs[0]].shape;
            const Shape& k = g.values[node.inputs[1]].shape;
            const Shape& v = g.values[node.inputs[2]].shape;
            if (q.size() < 2 || k.size() != q.size() || v.size() != q.size() ||
                product(q, 0, q.size() - 2) != product(k, 0, k.size() - 2) ||
                product(q, 0, q.size() - 2) != product(v, 0, v.size() - 2))
                return refuse("Q, K^T and V with different batch dimensions");
            return Status::ok();
        }
        case OpKind::kMultiHeadAttention: {
            const Shape& q = g.values[node.inputs[0]].shape;
            const Shape& k = g.values[node.inputs[1]].shape;
            const Shape& v = g.values[node.inputs[2]].shape;
            const int64_t h = node.attention_heads;
            if (q.size() != 3 || k.size() != 3 || v.size() != 3 || h <= 0 || q[2] % h != 0 ||
                v[2] % h != 0 || k[2] != q[2] || q[0] != k[0] || q[0] != v[0] || k[1] != v[1])
                return refuse("packed-head attention of shapes other than [B, T, H*D]");
            return Status::ok();
        }
        case OpKind::kLayerNorm:
        case OpKind::kChannelLayerNorm:
            if (!constant(1) || (node.inputs.size() > 2 && node.inputs[2] >= 0 && !constant(2)))
                return refuse("run-time LayerNorm scale or bias");
            if (node.op == OpKind::kChannelLayerNorm && g.values[node.inputs[0]].shape.size() < 3)
                return refuse("channel LayerNorm of a tensor without positions");
            return Status::ok();
        case OpKind::kRotary:
            if (!constant(1) || !constant(2)) return refuse("run-time rotary tables");
            return Status::ok();
        case OpKind::kMaxPool:
        case OpKind::kAveragePool:
            if (g.values[node.inputs[0]].shape.size() != 5)
                return refuse("only 3D pooling runs on CUDA");
            for (int64_t d : node.pool.dilations)
                if (d != 1) return refuse("dilated pooling");
            return Status::ok();
        case OpKind::kGlobalAveragePool:
            if (g.values[node.inputs[0]].shape.size() < 3) return refuse("pooling without space");
            return Status::ok();
        case OpKind::kIdentity:
        case OpKind::kReshape:
        case OpKind::kTranspose:
        case OpKind::kSlice:
        case OpKind::kConcat:
        case OpKind::kExpand:
        case OpKind::kTile:
        case OpKind::kRoll:
        case OpKind::kWhere:
        case OpKind::kPRelu:
        case OpKind::kSoftmax:
        case OpKind::kReduceMean:
        case OpKind::kReduceSum:
        case OpKind::kReduceMax:
            return Status::ok();
        default:
            return refuse("op not implemented by the CUDA backend");
    }
}

// ---- operands and results ----

void Planner::pushTensor(TensorStep step) {
    tensor_steps_.push_back(std::move(step));
    Step s;
    s.kind = Step::Kind::kTensor;
    s.tensor = int(tensor_steps_.size() - 1);
    push(s);
}

TRef Planner::newPacked(const Shape& shape) {
    TRef r;
    r.buffer = newBufferBytes(size_t(engine::numel(shape)) * sizeof(float));
    r.type = StorageType::kFloat32;
    return reshaped(r, shape);
}

TRef Planner::viewOf(const PView& v, const Dims& d) const {
    TRef r;
    r.buffer = v.buffer;
    r.offset = v.c_offset;
    r.type = st_;
    r.shape = {d.n, v.channels, d.d, d.h, d.w};
    r.mod = r.shape;
    r.strides = {d.spatial() * v.ldc, 1, d.h * d.w * v.ldc, d.w * v.ldc, v.ldc};
    return r;
}

Result<TRef> Planner::operand(const Node& node, ValueId id) {
    if (id < 0) return nodeError(node, StatusCode::kInternal, "missing operand");
    if (g_.isConstant(id)) {
        const engine::Tensor& t = g_.constant(id);
        TRef r;
        r.param = addParam(t.toFloats()).offset;
        return reshaped(r, t.shape());
    }
    if (has_tref_[id]) return trefs_[id];
    if (has_view_[id]) return viewOf(views_[id], dims_[id]);
    return nodeError(node, StatusCode::kUnsupported,
                     "input '" + g_.values[id].name + "' is not a value the CUDA backend computed");
}

Result<TRef> Planner::packedOperand(const Node& node, ValueId id) {
    VOXSEG_ASSIGN_OR_RETURN(TRef r, operand(node, id));
    if (isRowMajor(r)) return r;
    TensorStep copy;
    copy.kind = TensorStep::Kind::kCopy;
    copy.a = r;
    copy.y = newPacked(r.shape);
    const TRef packed = copy.y;
    pushTensor(std::move(copy));
    trefs_[id] = packed;  // a packed twin for later tensor-op readers
    has_tref_[id] = true;
    return packed;
}

TRef Planner::outputRef(ValueId id) {
    if (has_view_[id]) return viewOf(views_[id], dims_[id]);
    trefs_[id] = newPacked(g_.values[id].shape);
    has_tref_[id] = true;
    return trefs_[id];
}

TRef Planner::packedOutput(ValueId id) {
    if (has_view_[id]) return newPacked(g_.values[id].shape);
    return outputRef(id);
}

void Planner::finishPacked(ValueId id, const TRef& written) {
    if (!has_view_[id]) return;
    TensorStep copy;
    copy.kind = TensorStep::Kind::kCopy;
    copy.a = written;
    copy.y = viewOf(views_[id], dims_[id]);
    pushTensor(std::move(copy));
    trefs_[id] = written;
    has_tref_[id] = true;
}

void Planner::alias(ValueId id, const TRef& packed, const Shape& shape) {
    trefs_[id] = reshaped(packed, shape);
    has_tref_[id] = true;
}

// Fused residual (unless the op added it) and activation, in place on the op's result.
Status Planner::applyTensorEpilogue(const Node& node, const TRef& y) {
    const Shape& shape = g_.values[node.outputs[0]].shape;
    auto inPlace = [&](EltOp op, const TRef* b) {
        TensorStep s;
        s.kind = TensorStep::Kind::kEltwise;
        s.op = op;
        s.y = y;
        s.a = y;
        if (b) s.b = broadcastTo(*b, shape);
        s.alpha = node.fused_alpha;
        pushTensor(std::move(s));
    };
    if (node.fused_residual >= 0 && node.op != OpKind::kMatMul) {
        VOXSEG_ASSIGN_OR_RETURN(TRef r, operand(node, node.fused_residual));
        inPlace(EltOp::kAdd, &r);
    }
    switch (node.fused_activation) {
        case ActivationKind::kNone:
            break;
        case ActivationKind::kRelu:
            inPlace(EltOp::kRelu, nullptr);
            break;
        case ActivationKind::kLeakyRelu:
            inPlace(EltOp::kLeakyRelu, nullptr);
            break;
        case ActivationKind::kSigmoid:
            inPlace(EltOp::kSigmoid, nullptr);
            break;
        case ActivationKind::kSilu:
            inPlace(EltOp::kSilu, nullptr);
            break;
        case ActivationKind::kPRelu: {
            VOXSEG_ASSIGN_OR_RETURN(TRef slope, operand(node, node.fused_prelu_slope));
            inPlace(EltOp::kPRelu, &slope);
            break;
        }
    }
    return Status::ok();
}

Status Planner::emit(const Node& node, TensorStep step) {
    const TRef y = step.y;
    pushTensor(std::move(step));
    return applyTensorEpilogue(node, y);
}

Status Planner::emitPacked(const Node& node, std::optional<TensorStep> step, const TRef& y) {
    if (step) pushTensor(std::move(*step));
    VOXSEG_RETURN_IF_ERROR(applyTensorEpilogue(node, y));
    finishPacked(node.outputs[0], y);
    return Status::ok();
}

Status Planner::lowerTensorOp(const Node& node) {
    VOXSEG_RETURN_IF_ERROR(tensorOpSupported(g_, node));
    switch (node.op) {
        case OpKind::kReshape:
        case OpKind::kTranspose:
        case OpKind::kSlice:
        case OpKind::kExpand:
        case OpKind::kTile:
            return lowerCopyOp(node);
        case OpKind::kConcat:
            return lowerConcat(node);
        case OpKind::kRoll:
            return lowerRoll(node);
        case OpKind::kPad:
            return lowerPad(node);
        case OpKind::kMatMul:
            return lowerMatMul(node);
        case OpKind::kAttention:
            return lowerAttention(node);
        case OpKind::kMultiHeadAttention:
            return lowerMultiHeadAttention(node);
        case OpKind::kChannelLayerNorm:
            return lowerChannelLayerNorm(node);
        case OpKind::kLayerNorm:
        case OpKind::kSoftmax:
        case OpKind::kRotary:
            return lowerRowOp(node);
        case OpKind::kReduceMean:
        case OpKind::kReduceSum:
        case OpKind::kReduceMax:
        case OpKind::kGlobalAveragePool:
            return lowerReduce(node);
        case OpKind::kMaxPool:
        case OpKind::kAveragePool:
            return lowerPool(node);
        default:
            return lowerEltwise(node);
    }
}

// ---- converters ----

Status Planner::lowerEltwise(const Node& node) {
    const ValueId out = node.outputs[0];
    const Shape& shape = g_.values[out].shape;
    VOXSEG_ASSIGN_OR_RETURN(EltOp op, eltOpOf(node));
    if (op == EltOp::kCopy && !has_view_[out]) {  // Identity of a packed value: an alias
        VOXSEG_ASSIGN_OR_RETURN(TRef x, operand(node, node.inputs[0]));
        if (isRowMajor(x)) {
            alias(out, x, shape);
            return applyTensorEpilogue(node, trefs_[out]);
        }
    }
    TensorStep s;
    s.kind = TensorStep::Kind::kEltwise;
    s.op = op;
    s.alpha = node.alpha;
    s.lo = engine::unaryFnOf(node.op) ? node.beta : node.clip_min;  // kUnaryMath: beta in lo
    s.hi = node.clip_max;
    TRef* operands[3] = {&s.a, &s.b, &s.c};
    for (int i = 0; i < math::eltArity(op); ++i) {
        VOXSEG_ASSIGN_OR_RETURN(TRef x, operand(node, node.inputs[size_t(i)]));
        *operands[i] = broadcastTo(x, shape);
    }
    s.y = outputRef(out);
    return emit(node, std::move(s));
}

Status Planner::lowerCopyOp(const Node& node) {
    const ValueId out = node.outputs[0];
    const Shape& shape = g_.values[out].shape;
    TRef src;
    if (node.op == OpKind::kReshape) {
        VOXSEG_ASSIGN_OR_RETURN(TRef x, packedOperand(node, node.inputs[0]));
        src = reshaped(x, shape);
    } else {
        VOXSEG_ASSIGN_OR_RETURN(TRef x, operand(node, node.inputs[0]));
        src = x;
        switch (node.op) {
            case OpKind::kTranspose:
                for (size_t a = 0; a < shape.size(); ++a) {
                    const size_t from = size_t(node.perm[a]);
                    src.shape[a] = x.shape[from];
                    src.mod[a] = x.mod[from];
                    src.strides[a] = x.strides[from];
                }
                break;
            case OpKind::kSlice: {
                const std::vector<engine::SliceAxis> axes = engine::resolveSlice(node, x.shape);
                for (size_t a = 0; a < shape.size(); ++a) {
                    src.offset += axes[a].start * x.strides[a];
                    src.strides[a] = x.strides[a] * axes[a].step;
                    src.shape[a] = src.mod[a] = axes[a].count;
                }
                break;
            }
            case OpKind::kExpand:
                src = broadcastTo(x, shape);
                break;
            default:  // Tile: output index i reads i % input dim
                src.shape = shape;
                src.mod = x.shape;
                break;
        }
    }
    if (!has_view_[out] && isRowMajor(src) && src.mod == src.shape) {  // a view, no copy
        alias(out, src, shape);
        return applyTensorEpilogue(node, trefs_[out]);
    }
    TensorStep copy;
    copy.kind = TensorStep::Kind::kCopy;
    copy.a = src;
    copy.y = outputRef(out);
    return emit(node, std::move(copy));
}

Status Planner::lowerConcat(const Node& node) {
    const ValueId out = node.outputs[0];
    const size_t axis = size_t(normAxis(node.axis, g_.values[out].shape.size()));
    const TRef y = outputRef(out);
    int64_t offset = 0;
    for (ValueId in : node.inputs) {
        VOXSEG_ASSIGN_OR_RETURN(TRef x, operand(node, in));
        if (x.numel() == 0) continue;
        TensorStep copy;
        copy.kind = TensorStep::Kind::kCopy;
        copy.a = x;
        copy.y = y;
        copy.y.offset += offset * y.strides[axis];
        copy.y.shape[axis] = copy.y.mod[axis] = x.shape[axis];
        offset += x.shape[axis];
        pushTensor(std::move(copy));
    }
    return applyTensorEpilogue(node, y);
}

// Roll: one strided block copy per combination of the rolled axes' two parts (Swin's 3 axes: 8
// blocks), each part of y [0, shift) reading x [n - shift, n) and [shift, n) reading [0, n -
// shift).
Status Planner::lowerRoll(const Node& node) {
    const ValueId out = node.outputs[0];
    VOXSEG_ASSIGN_OR_RETURN(TRef x, packedOperand(node, node.inputs[0]));
    const TRef y = outputRef(out);
    std::vector<size_t> rolled;
    for (size_t a = 0; a < node.roll_shifts.size(); ++a)
        if (node.roll_shifts[a] != 0) rolled.push_back(a);
    for (size_t part = 0; part < (size_t(1) << rolled.size()); ++part) {
        TensorStep copy;
        copy.kind = TensorStep::Kind::kCopy;
        copy.a = x;
        copy.y = y;
        for (size_t k = 0; k < rolled.size(); ++k) {
            const size_t a = rolled[k];
            const int64_t n = x.shape[a], s = node.roll_shifts[a];
            const bool head = (part >> k) & 1;  // y [0, s) from x [n - s, n)
            const int64_t count = head ? s : n - s;
            copy.a.offset += (head ? n - s : 0) * x.strides[a];
            copy.y.offset += (head ? 0 : s) * y.strides[a];
            copy.a.shape[a] = copy.a.mod[a] = copy.y.shape[a] = copy.y.mod[a] = count;
        }
        pushTensor(std::move(copy));
    }
    return applyTensorEpilogue(node, y);
}

Status Planner::lowerPad(const Node& node) {
    const ValueId out = node.outputs[0];
    VOXSEG_ASSIGN_OR_RETURN(TRef x, operand(node, node.inputs[0]));
    const TRef y = outputRef(out);
    bool any = false;
    for (size_t a = 0; a < node.pad.pads_begin.size(); ++a)
        any |= node.pad.pads_begin[a] != 0 || node.pad.pads_end[a] != 0;
    if (any) {
        TensorStep fill;
        fill.kind = TensorStep::Kind::kFill;
        fill.y = y;
        fill.value = node.pad.value;
        pushTensor(std::move(fill));
    }
    TensorStep copy;
    copy.kind = TensorStep::Kind::kCopy;
    copy.a = x;
    copy.y = y;
    for (size_t a = 0; a < y.shape.size(); ++a) {
        const int64_t before = a < node.pad.pads_begin.size() ? node.pad.pads_begin[a] : 0;
        copy.y.offset += before * y.strides[a];
        copy.y.shape[a] = copy.y.mod[a] = x.shape[a];
    }
    pushTensor(std::move(copy));
    return applyTensorEpilogue(node, y);
}

Status Planner::lowerMatMul(const Node& node) {
    const ValueId out = node.outputs[0];
    const Shape& ys = g_.values[out].shape;
    VOXSEG_ASSIGN_OR_RETURN(TRef a, packedOperand(node, node.inputs[0]));
    VOXSEG_ASSIGN_OR_RETURN(TRef b, packedOperand(node, node.inputs[1]));
    const size_t ra = a.shape.size(), rb = b.shape.size(), ry = ys.size();
    const int64_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
    const int64_t batch = product(ys, 0, ry - 2);
    const int64_t a_batch = product(a.shape, 0, ra - 2), b_batch = product(b.shape, 0, rb - 2);
    // An operand broadcast over some batch axes but not all: materialised over the full batch.
    auto fullBatch = [&](TRef& t, int64_t rows, int64_t cols) {
        Shape full(ys.begin(), ys.end() - 2);
        full.push_back(rows);
        full.push_back(cols);
        TensorStep copy;
        copy.kind = TensorStep::Kind::kCopy;
        copy.a = broadcastTo(t, full);
        copy.y = newPacked(full);
        t = copy.y;
        pushTensor(std::move(copy));
    };
    if (a_batch != batch && a_batch != 1) fullBatch(a, M, K);
    if (b_batch != batch && b_batch != 1) fullBatch(b, K, N);
    TensorStep s;
    s.kind = TensorStep::Kind::kMatMul;
    GemmPlan& p = s.gemm;
    p.n = N, p.k = K, p.lda = K, p.ldb = N, p.ldd = N;
    if (b_batch == 1) {  // shared weights: every batch item's rows in one product
        p.m = batch * M;
        p.batch = 1;
    } else {
        p.m = M;
        p.batch = batch;
        p.stride_a = a_batch == 1 ? 0 : M * K;
        p.stride_b = K * N;
        p.stride_d = M * N;
    }
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(s.c, operand(node, node.inputs[2]));
        if (s.c.numel() != N)
            return nodeError(node, StatusCode::kUnsupported,
                             fmt::format("bias of {} values for {} columns", s.c.numel(), N));
    }
    if (node.fused_residual >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(s.residual, packedOperand(node, node.fused_residual));
        if (s.residual.shape != ys)
            return nodeError(node, StatusCode::kUnsupported, "fused residual of another shape");
    }
    s.a = a;
    s.b = b;
    s.y = packedOutput(out);
    const TRef y = s.y;
    return emitPacked(node, std::move(s), y);
}

TRef Planner::packedCopy(const TRef& x) {
    TensorStep copy;
    copy.kind = TensorStep::Kind::kCopy;
    copy.a = x;
    copy.y = newPacked(x.shape);
    const TRef y = copy.y;
    pushTensor(std::move(copy));
    return y;
}

Status Planner::attentionStep(const Node& node, const TRef& q, const TRef& kt, const TRef& v,
                              const TRef& y) {
    TensorStep s;
    s.kind = TensorStep::Kind::kAttention;
    s.a = q;
    s.b = kt;
    s.v = v;
    const size_t r = q.shape.size();
    s.tq = q.shape[r - 2];
    s.dh = q.shape[r - 1];
    s.tk = kt.shape[r - 1];
    s.dv = v.shape[r - 1];
    s.batch = product(q.shape, 0, r - 2);
    s.scale = node.attention_scale;
    // broadcastTo keeps a bias axis's own size as its index modulus: a batch axis of fewer
    // items than the scores' tiles (Swin's window mask).
    Shape scores = q.shape;
    scores[r - 1] = s.tk;
    for (size_t i = 3; i < std::min<size_t>(node.inputs.size(), 5); ++i) {
        if (node.inputs[i] < 0) continue;
        VOXSEG_ASSIGN_OR_RETURN(TRef bias, operand(node, node.inputs[i]));
        (i == 3 ? s.c : s.mask) = broadcastTo(bias, scores);
    }
    // Query tiles whose scores fit kAttentionScoreBytes: the full matrix is never kept when large.
    const int64_t row_bytes = std::max<int64_t>(s.batch * s.tk * int64_t(sizeof(float)), 1);
    s.tile = std::clamp<int64_t>(int64_t(kAttentionScoreBytes) / row_bytes, 1,
                                 std::max<int64_t>(s.tq, 1));
    s.scratch.buffer = newBufferBytes(size_t(s.batch * s.tile * s.tk) * sizeof(float));
    s.y = y;
    pushTensor(std::move(s));
    return Status::ok();
}

Status Planner::lowerAttention(const Node& node) {
    const ValueId out = node.outputs[0];
    VOXSEG_ASSIGN_OR_RETURN(TRef q, packedOperand(node, node.inputs[0]));
    VOXSEG_ASSIGN_OR_RETURN(TRef kt, packedOperand(node, node.inputs[1]));
    VOXSEG_ASSIGN_OR_RETURN(TRef v, packedOperand(node, node.inputs[2]));
    const TRef y = packedOutput(out);
    VOXSEG_RETURN_IF_ERROR(attentionStep(node, q, kt, v, y));
    return emitPacked(node, std::nullopt, y);
}

// Heads packed in the last axis: Q, K, V split into [B, H, T, D] (K transposed) by copies, the
// fused attention step, and the heads merged back into [B, Tq, H*Dv].
Status Planner::lowerMultiHeadAttention(const Node& node) {
    const ValueId out = node.outputs[0];
    const int64_t h = node.attention_heads;
    VOXSEG_ASSIGN_OR_RETURN(TRef q, packedOperand(node, node.inputs[0]));
    VOXSEG_ASSIGN_OR_RETURN(TRef k, packedOperand(node, node.inputs[1]));
    VOXSEG_ASSIGN_OR_RETURN(TRef v, packedOperand(node, node.inputs[2]));
    const int64_t b = q.shape[0], tq = q.shape[1], tk = k.shape[1];
    const int64_t d = q.shape[2] / h, dv = v.shape[2] / h;
    // [B, T, H, D] read as [B, H, T, D] (or [B, H, D, T] for K^T).
    auto heads = [&](const TRef& x, int64_t t, int64_t dim, bool transposed) {
        const TRef split = reshaped(x, {b, t, h, dim});
        TRef p = split;
        const int perm[4] = {0, 2, transposed ? 3 : 1, transposed ? 1 : 3};
        for (int a = 0; a < 4; ++a) {
            p.shape[a] = split.shape[perm[a]];
            p.mod[a] = split.mod[perm[a]];
            p.strides[a] = split.strides[perm[a]];
        }
        return packedCopy(p);
    };
    const TRef qh = heads(q, tq, d, false), kt = heads(k, tk, d, true),
               vh = heads(v, tk, dv, false);
    const TRef yh = newPacked({b, h, tq, dv});
    VOXSEG_RETURN_IF_ERROR(attentionStep(node, qh, kt, vh, yh));
    // [B, H, Tq, Dv] -> [B, Tq, H, Dv] = [B, Tq, H*Dv].
    const TRef y = packedOutput(out);
    TensorStep merge;
    merge.kind = TensorStep::Kind::kCopy;
    merge.a = yh;
    merge.a.shape = {b, tq, h, dv};
    merge.a.mod = merge.a.shape;
    merge.a.strides = {yh.strides[0], yh.strides[2], yh.strides[1], yh.strides[3]};
    merge.y = reshaped(y, {b, tq, h, dv});
    return emitPacked(node, std::move(merge), y);
}

// LayerNorm over the channels of [N, C, spatial...] at each position, read and written in the
// value's own layout (channels-last activations of convolutions: channels contiguous).
Status Planner::lowerChannelLayerNorm(const Node& node) {
    const ValueId out = node.outputs[0];
    VOXSEG_ASSIGN_OR_RETURN(TRef x, operand(node, node.inputs[0]));
    // Rows need one stride over all positions: true for both layouts the planner makes.
    auto uniform = [](const TRef& t) {
        for (size_t a = 2; a + 1 < t.shape.size(); ++a)
            if (t.shape[a + 1] != 1 && t.strides[a] != t.strides[a + 1] * t.shape[a + 1])
                return false;
        return true;
    };
    if (!uniform(x)) {
        VOXSEG_ASSIGN_OR_RETURN(x, packedOperand(node, node.inputs[0]));
    }
    TensorStep s;
    s.kind = TensorStep::Kind::kLayerNorm;
    s.a = x;
    s.cols = x.shape[1];
    s.epsilon = node.norm.epsilon;
    VOXSEG_ASSIGN_OR_RETURN(s.b, operand(node, node.inputs[1]));
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
        VOXSEG_ASSIGN_OR_RETURN(s.c, operand(node, node.inputs[2]));
    }
    if (s.b.numel() != s.cols || (s.c.valid() && s.c.numel() != s.cols))
        return nodeError(node, StatusCode::kUnsupported,
                         fmt::format("scale/bias are not {} values", s.cols));
    // Channels-last in, channels-last out (the next convolution reads it without a conversion).
    if (has_view_[node.inputs[0]] && !has_tref_[out] && has_dims_[out]) outputView(out);
    s.y = outputRef(out);
    auto rows = [&](const TRef& t) {
        RowView r;
        r.outer = t.shape[0];
        r.inner = product(t.shape, 2, t.shape.size());
        r.outer_stride = t.strides[0];
        r.inner_stride = t.shape.size() > 2 ? t.strides.back() : 0;
        r.col_stride = t.strides[1];
        return r;
    };
    s.x_rows = rows(x);
    s.y_rows = rows(s.y);
    return emit(node, std::move(s));
}

Status Planner::lowerRowOp(const Node& node) {
    const ValueId out = node.outputs[0];
    TensorStep s;
    VOXSEG_ASSIGN_OR_RETURN(s.a, packedOperand(node, node.inputs[0]));
    const Shape& xs = s.a.shape;
    switch (node.op) {
        case OpKind::kLayerNorm: {
            s.kind = TensorStep::Kind::kLayerNorm;
            const size_t axis = size_t(normAxis(node.axis, xs.size()));
            s.cols = product(xs, axis, xs.size());
            s.rows = s.cols ? s.a.numel() / s.cols : 0;
            s.epsilon = node.norm.epsilon;
            VOXSEG_ASSIGN_OR_RETURN(s.b, operand(node, node.inputs[1]));
            if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
                VOXSEG_ASSIGN_OR_RETURN(s.c, operand(node, node.inputs[2]));
            }
            if (s.b.numel() != s.cols || (s.c.valid() && s.c.numel() != s.cols))
                return nodeError(node, StatusCode::kUnsupported,
                                 fmt::format("scale/bias are not {} values", s.cols));
            s.x_rows.outer = s.y_rows.outer = s.rows;
            s.x_rows.outer_stride = s.y_rows.outer_stride = s.cols;
            break;
        }
        case OpKind::kSoftmax: {
            s.kind = TensorStep::Kind::kSoftmax;
            const size_t axis = size_t(normAxis(node.axis, xs.size()));
            s.outer = product(xs, 0, axis);
            s.len = xs[axis];
            s.inner = product(xs, axis + 1, xs.size());
            break;
        }
        default: {  // Rotary
            s.kind = TensorStep::Kind::kRotary;
            s.cols = xs.back();
            VOXSEG_ASSIGN_OR_RETURN(s.b, operand(node, node.inputs[1]));
            VOXSEG_ASSIGN_OR_RETURN(s.c, operand(node, node.inputs[2]));
            if (s.cols % 2 != 0 || s.b.numel() == 0 || s.b.numel() != s.c.numel() ||
                s.b.numel() % s.cols != 0)
                return nodeError(node, StatusCode::kUnsupported, "rotary tables do not fit");
            break;
        }
    }
    s.y = packedOutput(out);
    const TRef y = s.y;
    return emitPacked(node, std::move(s), y);
}

Status Planner::lowerReduce(const Node& node) {
    const ValueId out = node.outputs[0];
    TensorStep s;
    s.kind = TensorStep::Kind::kReduce;
    VOXSEG_ASSIGN_OR_RETURN(s.a, operand(node, node.inputs[0]));
    Shape keep = s.a.shape;
    for (size_t a = 0; a < keep.size(); ++a) {
        const bool reduced = node.op == OpKind::kGlobalAveragePool
                                 ? a >= 2
                                 : node.reduce_axes.empty() ||
                                       std::find(node.reduce_axes.begin(), node.reduce_axes.end(),
                                                 int64_t(a)) != node.reduce_axes.end();
        if (reduced) keep[a] = 1;
    }
    s.reduce = node.op == OpKind::kReduceSum   ? ReduceKind::kSum
               : node.op == OpKind::kReduceMax ? ReduceKind::kMax
                                               : ReduceKind::kMean;
    const TRef y = packedOutput(out);
    s.y = reshaped(y, keep);  // the kept-dims shape of the same row-major elements
    return emitPacked(node, std::move(s), y);
}

Status Planner::lowerPool(const Node& node) {
    const ValueId out = node.outputs[0];
    TensorStep s;
    s.kind = TensorStep::Kind::kPool;
    VOXSEG_ASSIGN_OR_RETURN(s.a, operand(node, node.inputs[0]));
    const engine::PoolAttrs& pa = node.pool;
    s.pool.max = node.op == OpKind::kMaxPool;
    s.pool.count_include_pad = pa.count_include_pad;
    for (size_t i = 0; i < 3; ++i) {
        s.pool.kernel[i] = pa.kernel.size() > i ? pa.kernel[i] : 1;
        s.pool.stride[i] = pa.strides.size() > i ? pa.strides[i] : 1;
        s.pool.pad[i] = pa.pads_begin.size() > i ? pa.pads_begin[i] : 0;
        s.pool.pad_end[i] = pa.pads_end.size() > i ? pa.pads_end[i] : 0;
    }
    s.y = outputRef(out);
    return emit(node, std::move(s));
}

}  // namespace voxseg::cuda::planning
