// Data-movement ops, rare inside U-Nets: Identity (a copy in the same layout), Reshape (the
// input's buffer seen with the new dims when the input dies there, else a copy), Transpose and
// Slice (one strided gather loop), Roll (a gather of rows), Pad (constant, reflect, edge), Expand
// and Tile (a broadcast or modulo gather loop). All but Identity work on plain f32.
#include "engine/cpu/plan.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace voxseg::engine::cpu {
namespace {

// out[i...] = in[offset + sum(i_d * strides_d)] (strides may be negative), a row (the last
// output dim) at a time: one index decomposition per row, a memcpy when the row is contiguous.
Kernel gatherKernel(Shape out_shape, int64_t offset, std::vector<int64_t> strides) {
    return [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
        const int rank = static_cast<int>(out_shape.size());
        const int64_t len = rank ? out_shape[rank - 1] : 1;
        const int64_t step = rank ? strides[rank - 1] : 1;
        const int64_t rows = len ? numel(out_shape) / len : 0;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            int64_t rem = r, off = offset;
            for (int d = rank - 2; d >= 0; --d) {
                off += (rem % out_shape[d]) * strides[d];
                rem /= out_shape[d];
            }
            float* o = out + r * len;
            const float* i = in + off;
            if (step == 1) {
                std::memcpy(o, i, static_cast<size_t>(len) * sizeof(float));
            } else {
                for (int64_t j = 0; j < len; ++j) o[j] = i[j * step];
            }
        }
    };
}

Status planGather(Plan& plan, int64_t offset, std::vector<int64_t> strides, const char* what) {
    const Node& n = plan.node();
    const Shape& ys = plan.graph().values[n.outputs[0]].shape;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    plan.addKernel(what, gatherKernel(ys, offset, std::move(strides)), {src, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

// Roll (torch.roll): a row (the last dim) at a time, its source row found once per row, the row
// itself one memcpy, or two when the last dim is rolled too (Swin: rows of C channels, the three
// spatial axes rolled).
Status planRoll(Plan& plan) {
    const Node& n = plan.node();
    const Shape xs = plan.graph().values[n.inputs[0]].shape;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    MemRef dst = plan.newBuffer(plainDesc(xs, dt::f32));
    const std::vector<int64_t> strides = plainStrides(xs), shifts = n.roll_shifts;
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
        const int rank = static_cast<int>(xs.size());
        const int64_t len = rank ? xs[rank - 1] : 1;
        const int64_t tail = rank ? shifts[rank - 1] : 0;  // out[0, tail) = in[len - tail, len)
        const int64_t rows = len ? numel(xs) / len : 0;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            int64_t rem = r, off = 0;
            for (int d = rank - 2; d >= 0; --d) {
                const int64_t i = rem % xs[d];
                off += (i >= shifts[d] ? i - shifts[d] : i - shifts[d] + xs[d]) * strides[d];
                rem /= xs[d];
            }
            float* o = out + r * len;
            const float* row = in + off;
            std::memcpy(o, row + len - tail, static_cast<size_t>(tail) * sizeof(float));
            std::memcpy(o + tail, row, static_cast<size_t>(len - tail) * sizeof(float));
        }
    };
    plan.addKernel("roll gather", std::move(k), {src, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

Status planPad(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape xs = g.values[n.inputs[0]].shape;
    const Shape ys = g.values[n.outputs[0]].shape;
    const PadAttrs p = n.pad;
    const size_t rank = xs.size();
    if (p.pads_begin.size() != rank) return nodeError(plan, "pads do not match the input rank");
    // Per axis: output index -> input index, -1 for the constant border.
    std::vector<std::vector<int64_t>> maps(rank);
    for (size_t d = 0; d < rank; ++d) {
        for (int64_t o = 0; o < ys[d]; ++o) {
            int64_t i = o - p.pads_begin[d];
            if (i < 0 || i >= xs[d]) {
                if (p.mode == PadAttrs::Mode::kConstant) {
                    i = -1;
                } else if (p.mode == PadAttrs::Mode::kEdge) {
                    i = std::clamp<int64_t>(i, 0, xs[d] - 1);
                } else {  // reflect without repeating the edge
                    const int64_t period = 2 * (xs[d] - 1);
                    if (period == 0) {
                        i = 0;
                    } else {
                        i = ((i % period) + period) % period;
                        if (i >= xs[d]) i = period - i;
                    }
                }
            }
            maps[d].push_back(i);
        }
    }
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    const auto in_strides = plainStrides(xs);
    const float value = p.value;
    // A row (the last axis) at a time: its source row found once (or none: a border row), then
    // one memcpy between the row's constant borders, or the last axis' map where it reflects or
    // repeats edges. (Swin pads its 48^3 x 48 feature maps to whole windows in every shifted
    // block: per element, the index decomposition took 28 ms per pad on the 2-core EPYC.)
    const bool constant = p.mode == PadAttrs::Mode::kConstant;
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
        const int last = static_cast<int>(rank) - 1;
        const int64_t len = rank ? ys[last] : 1;
        const int64_t rows = len ? numel(ys) / len : 0;
        // constant mode: `before` border values, `inner` copied from the source row's `first`
        const int64_t before = rank ? std::clamp<int64_t>(p.pads_begin[last], 0, len) : 0;
        const int64_t first = rank ? std::max<int64_t>(-p.pads_begin[last], 0) : 0;
        const int64_t inner =
            rank ? std::clamp<int64_t>(xs[last] + p.pads_begin[last] - before, 0, len - before) : 1;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            int64_t rem = r, off = 0;
            bool border = false;
            for (int d = last - 1; d >= 0; --d) {
                const int64_t i = maps[d][rem % ys[d]];
                rem /= ys[d];
                border = border || i < 0;
                off += i * in_strides[d];
            }
            float* o = out + r * len;
            if (border) {
                std::fill_n(o, len, value);
            } else if (constant && rank) {
                std::fill_n(o, before, value);
                std::memcpy(o + before, in + off + first,
                            static_cast<size_t>(inner) * sizeof(float));
                std::fill_n(o + before + inner, len - before - inner, value);
            } else {
                for (int64_t j = 0; j < len; ++j) o[j] = in[off + (rank ? maps[last][j] : 0)];
            }
        }
    };
    plan.addKernel("pad plain loop", std::move(k), {src, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace

Status planShapeOp(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const ValueId x = n.inputs[0];
    const Shape& xs = g.values[x].shape;
    const Shape& ys = g.values[n.outputs[0]].shape;
    switch (n.op) {
        case OpKind::kIdentity: {
            const dnnl::memory::desc md =
                plan.has(x) ? plan.desc(x) : plainDesc(xs, plan.actType());
            VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensure(x, md));
            MemRef dst = plan.newBuffer(md);
            VOXSEG_RETURN_IF_ERROR(plan.addCopy(src, dst));
            plan.define(n.outputs[0], dst);
            return planUnfusedEpilogue(plan, dst);
        }
        case OpKind::kReshape: {
            if (numel(xs) != numel(ys)) return nodeError(plan, "element count changes");
            VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(x));
            // The input's own bytes under the new dims when it dies here (no copy: Swin's window
            // partition is Reshape/Transpose/Reshape chains); else a copy, so that an op writing
            // in place over the output cannot change a value still read later.
            if (std::optional<MemRef> alias = plan.tryInPlace(x, src.md)) {
                plan.define(n.outputs[0], MemRef{alias->buffer, plainDesc(ys, dt::f32), {}});
                return planUnfusedEpilogue(plan, plan.ref(n.outputs[0]));
            }
            MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
            // Same bytes seen with the output's dims: a plain copy.
            MemRef view{src.buffer, plainDesc(ys, dt::f32), src.fixed};
            if (src.buffer < 0)
                view.fixed = dnnl::memory(view.md, plan.engine(), src.fixed.get_data_handle());
            VOXSEG_RETURN_IF_ERROR(plan.addCopy(view, dst));
            plan.define(n.outputs[0], dst);
            return planUnfusedEpilogue(plan, dst);
        }
        case OpKind::kTranspose: {
            const auto in_strides = plainStrides(xs);
            std::vector<int64_t> strides;
            for (size_t i = 0; i < ys.size(); ++i)
                strides.push_back(in_strides[n.perm.empty() ? ys.size() - 1 - i : n.perm[i]]);
            return planGather(plan, 0, strides, "transpose gather");
        }
        case OpKind::kRoll:
            return planRoll(plan);
        case OpKind::kSlice: {
            const auto in_strides = plainStrides(xs);
            const std::vector<SliceAxis> axes = resolveSlice(n, xs);
            std::vector<int64_t> strides = in_strides;
            int64_t offset = 0;
            for (size_t a = 0; a < axes.size(); ++a) {
                offset += axes[a].start * in_strides[a];
                strides[a] = in_strides[a] * axes[a].step;
            }
            return planGather(plan, offset, strides, "slice gather");
        }
        case OpKind::kPad:
            return planPad(plan);
        default:
            return nodeError(plan, "not a data-movement op");
    }
}

// Expand (strides 0 along broadcast axes) and Tile (index modulo the input dim).
Status planExpandOrTile(Plan& plan) {
    const Node& n = plan.node();
    const Graph& g = plan.graph();
    const Shape xs = g.values[n.inputs[0]].shape;
    const Shape ys = g.values[n.outputs[0]].shape;
    VOXSEG_ASSIGN_OR_RETURN(MemRef src, plan.ensurePlainF32(n.inputs[0]));
    MemRef dst = plan.newBuffer(plainDesc(ys, dt::f32));
    const bool tile = n.op == OpKind::kTile;
    const std::vector<int64_t> st = tile ? plainStrides(xs) : broadcastStrides(xs, ys);
    const Shape in_dims = withLeadingOnes(xs, ys.size());
    const int rank = static_cast<int>(ys.size());
    Kernel k = [=](const std::vector<dnnl::memory>& m) {
        const float* in = static_cast<const float*>(m[0].get_data_handle());
        float* out = static_cast<float*>(m[1].get_data_handle());
        const int64_t total = numel(ys);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < total; ++i) {
            int64_t rem = i, off = 0;
            for (int d = rank - 1; d >= 0; --d) {
                const int64_t q = rem % ys[d];
                rem /= ys[d];
                off += (tile ? q % in_dims[d] : q) * st[d];
            }
            out[i] = in[off];
        }
    };
    plan.addKernel(tile ? "tile plain loop" : "expand plain loop", std::move(k), {src, dst});
    plan.define(n.outputs[0], dst);
    return planUnfusedEpilogue(plan, dst);
}

}  // namespace voxseg::engine::cpu
