// Reference reductions: ReduceMean / ReduceSum / ReduceMax over any axes and Softmax along
// one axis, in double.
#include "engine/reference/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::engine::reference {

void reduce(const Node& n, const Tensor& x, Tensor& y) {
    const Shape& xs = x.shape();
    // The output index of every input element: reduced axes collapse to 0.
    Shape kept = xs;
    for (size_t i = 0; i < xs.size(); ++i)
        if (n.reduce_axes.empty() || std::find(n.reduce_axes.begin(), n.reduce_axes.end(),
                                               int64_t(i)) != n.reduce_axes.end())
            kept[i] = 1;
    const std::vector<int64_t> kst = stridesOf(kept);
    const bool is_max = n.op == OpKind::kReduceMax;
    std::vector<double> acc(static_cast<size_t>(y.numel()),
                            is_max ? -std::numeric_limits<double>::infinity() : 0.0);
    const float* xp = x.data<float>();
    for (int64_t flat = 0; flat < x.numel(); ++flat) {
        int64_t r = flat, off = 0;
        for (size_t a = xs.size(); a-- > 0;) {
            const int64_t c = r % xs[a];
            r /= xs[a];
            off += (kept[a] == 1 ? 0 : c) * kst[a];
        }
        acc[off] = is_max ? std::max<double>(acc[off], xp[flat]) : acc[off] + xp[flat];
    }
    const double count =
        static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(y.numel(), 1));
    float* yp = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i)
        yp[i] = static_cast<float>(n.op == OpKind::kReduceMean ? acc[i] / count : acc[i]);
}

void softmax(int64_t axis, const Tensor& x, Tensor& y) {
    const Shape& s = x.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= s[i];
    for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
    const int64_t len = s[axis];
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            const int64_t base = o * len * inner + i;
            float mx = -std::numeric_limits<float>::infinity();
            for (int64_t k = 0; k < len; ++k) mx = std::max(mx, xp[base + k * inner]);
            double sum = 0;
            for (int64_t k = 0; k < len; ++k) sum += std::exp(double(xp[base + k * inner]) - mx);
            for (int64_t k = 0; k < len; ++k)
                yp[base + k * inner] =
                    static_cast<float>(std::exp(double(xp[base + k * inner]) - mx) / sum);
        }
}

}  // namespace voxseg::engine::reference
