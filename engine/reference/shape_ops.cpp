// Reference data movement: Identity / Reshape (a copy), Concat, Pad, Transpose, Slice, Expand,
// Tile and Roll as index arithmetic on row-major tensors.
#include "engine/graph/broadcast.h"
#include "engine/reference/ops.h"

#include <algorithm>

namespace voxseg::engine::reference {

namespace {

// y's element at each coordinate (i_a) is x's at (source(a, i_a)).
template <typename Source>
void gatherCoords(const Tensor& x, Tensor& y, Source source) {
    const Shape& ys = y.shape();
    const std::vector<int64_t> ist = stridesOf(x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = ys.size(); a-- > 0;) {
            off += source(a, r % ys[a]) * ist[a];
            r /= ys[a];
        }
        yp[flat] = xp[off];
    }
}

}  // namespace

// Identity and Reshape: the same floats.
void copy(const Tensor& x, Tensor& y) {
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] = xp[i];
}

void concat(int64_t axis, const std::vector<const Tensor*>& in, Tensor& y) {
    const Shape& s = y.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= s[i];
    for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
    float* yp = y.data<float>();
    for (int64_t o = 0; o < outer; ++o) {
        int64_t offset = 0;
        for (const Tensor* t : in) {
            const int64_t len = t->dim(axis) * inner;
            const float* src = t->data<float>() + o * len;
            std::copy(src, src + len, yp + o * s[axis] * inner + offset);
            offset += len;
        }
    }
}

void pad(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& is = x.shape();
    const Shape& os = y.shape();
    const std::vector<int64_t> ist = stridesOf(is);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        bool outside = false;
        for (size_t a = is.size(); a-- > 0;) {
            int64_t i = r % os[a] - n.pad.pads_begin[a];
            r /= os[a];
            if (i < 0 || i >= is[a]) {
                switch (n.pad.mode) {
                    case PadAttrs::Mode::kConstant:
                        outside = true;
                        break;
                    case PadAttrs::Mode::kEdge:
                        i = std::clamp<int64_t>(i, 0, is[a] - 1);
                        break;
                    case PadAttrs::Mode::kReflect:
                        i = i < 0 ? -i : 2 * (is[a] - 1) - i;
                        break;
                }
            }
            off += i * ist[a];
        }
        yp[flat] = outside ? n.pad.value : xp[off];
    }
}

void transpose(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& os = y.shape();
    const std::vector<int64_t> ist = stridesOf(x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = os.size(); a-- > 0;) {
            off += (r % os[a]) * ist[n.perm[a]];
            r /= os[a];
        }
        yp[flat] = xp[off];
    }
}

void slice(const Node& n, const Tensor& x, Tensor& y) {
    const std::vector<SliceAxis> axes = resolveSlice(n, x.shape());
    const Shape& os = y.shape();
    const std::vector<int64_t> ist = stridesOf(x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = os.size(); a-- > 0;) {
            off += (axes[a].start + (r % os[a]) * axes[a].step) * ist[a];
            r /= os[a];
        }
        yp[flat] = xp[off];
    }
}

void expand(const Tensor& x, Tensor& y) {
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    forEachBroadcast<1>(y.shape(), {&x.shape()},
                        [&](int64_t i, const std::array<int64_t, 1>& o) { yp[i] = xp[o[0]]; });
}

void tile(const Tensor& x, Tensor& y) {
    const Shape& xs = x.shape();
    gatherCoords(x, y, [&](size_t a, int64_t i) { return i % xs[a]; });
}

// y[..., i, ...] = x[..., (i - shift) mod n, ...] along every axis.
void roll(const Tensor& x, const std::vector<int64_t>& shifts, Tensor& y) {
    const Shape& xs = x.shape();
    gatherCoords(x, y, [&](size_t a, int64_t i) { return (i - shifts[a] + xs[a]) % xs[a]; });
}

}  // namespace voxseg::engine::reference
