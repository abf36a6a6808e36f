// Reference Resize: separable linear or nearest taps per axis, every ONNX coordinate mode
// and nearest rounding.
#include "engine/reference/ops.h"

#include <algorithm>
#include <cmath>

namespace voxseg::engine::reference {

namespace {

// Input coordinate for output index `o` along one axis (ONNX Resize coordinate modes). Computed
// in float32 like ONNX Runtime and PyTorch: nearest modes flip at exact ties otherwise.
double resizeCoord(const ResizeAttrs& r, int64_t o, int64_t in, int64_t out, float scale) {
    const float of = static_cast<float>(o);
    switch (r.coord) {
        case ResizeCoord::kHalfPixel:
            return (of + 0.5f) / scale - 0.5f;
        case ResizeCoord::kPytorchHalfPixel:
            return out > 1 ? (of + 0.5f) / scale - 0.5f : 0.0f;
        case ResizeCoord::kAlignCorners:
            return out > 1 ? of * static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
        case ResizeCoord::kAsymmetric:
            return of / scale;
    }
    return 0.0;
}

int64_t nearestIndex(NearestRounding mode, double x, int64_t in) {
    double r;
    switch (mode) {
        case NearestRounding::kRoundPreferFloor:
            r = (x - std::floor(x) == 0.5) ? std::floor(x) : std::round(x);
            break;
        case NearestRounding::kRoundPreferCeil:
            r = std::round(x);  // rounds halves away from zero, i.e. up for x >= 0
            if (x < 0 && x - std::floor(x) == 0.5) r = std::ceil(x);
            break;
        case NearestRounding::kFloor:
            r = std::floor(x);
            break;
        default:
            r = std::ceil(x);
            break;
    }
    return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

}  // namespace

// Separable resize: per axis, each output index reads two input indices with two weights
// (nearest: one index, weight 1).
void resize(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& is = x.shape();
    const Shape& os = y.shape();
    const size_t rank = is.size();
    struct Tap {
        int64_t i0, i1;
        double w1;
    };
    std::vector<std::vector<Tap>> taps(rank);
    for (size_t a = 0; a < rank; ++a) {
        for (int64_t o = 0; o < os[a]; ++o) {
            const float scale = n.resize.scales[a];
            const double c = resizeCoord(n.resize, o, is[a], os[a], scale);
            if (n.resize.mode == ResizeMode::kNearest) {
                const int64_t i = nearestIndex(n.resize.nearest, c, is[a]);
                taps[a].push_back({i, i, 0.0});
            } else {
                const double cc = std::clamp(c, 0.0, double(is[a] - 1));
                const int64_t i0 = static_cast<int64_t>(std::floor(cc));
                const int64_t i1 = std::min(i0 + 1, is[a] - 1);
                taps[a].push_back({i0, i1, cc - double(i0)});
            }
        }
    }
    const std::vector<int64_t> ist = stridesOf(is);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    std::vector<int64_t> idx(rank);
    for (int64_t flat = 0; flat < y.numel(); ++flat) {
        int64_t r = flat;
        for (size_t a = rank; a-- > 0;) {
            idx[a] = r % os[a];
            r /= os[a];
        }
        // Sum over the 2^rank corners; axes with weight 0 contribute one corner.
        double acc = 0;
        for (uint32_t corner = 0; corner < (1u << rank); ++corner) {
            double wgt = 1;
            int64_t off = 0;
            for (size_t a = 0; a < rank; ++a) {
                const Tap& t = taps[a][idx[a]];
                const bool hi = (corner >> a) & 1u;
                if (hi && t.w1 == 0.0) {
                    wgt = 0;
                    break;
                }
                wgt *= hi ? t.w1 : 1.0 - t.w1;
                off += (hi ? t.i1 : t.i0) * ist[a];
            }
            if (wgt != 0) acc += wgt * xp[off];
        }
        yp[flat] = static_cast<float>(acc);
    }
}

}  // namespace voxseg::engine::reference
