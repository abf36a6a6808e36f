// generate_bounding_boxes / random_sampling_fallback of nnInteractive 2.6.0 (utils/bboxes.py),
// restated. Coverage counts use a summed-volume table of the uncovered voxels, rebuilt after
// each chosen box, instead of summing every candidate's box: same counts, less work.
#include "edit/interactive/refinement_boxes.h"

#include "edit/interactive/resample.h"

#include <algorithm>
#include <optional>

namespace voxseg::edit::interactive {
namespace {

// Sum of a 0/1 volume over boxes, from a (z+1, y+1, x+1) prefix-sum table.
class BoxSums {
  public:
    BoxSums(const std::vector<uint8_t>& m, const Index3& s) : s_(s) {
        const int64_t py = s[2] + 1, pz = (s[1] + 1) * py;
        t_.assign(static_cast<size_t>((s[0] + 1) * pz), 0);
        for (int64_t z = 0; z < s[0]; ++z)
            for (int64_t y = 0; y < s[1]; ++y) {
                int64_t row = 0;
                const uint8_t* m_row = m.data() + (z * s[1] + y) * s[2];
                int64_t* cur = &t_[(z + 1) * pz + (y + 1) * py];
                const int64_t* up = &t_[z * pz + (y + 1) * py];
                const int64_t* back = &t_[(z + 1) * pz + y * py];
                const int64_t* diag = &t_[z * pz + y * py];
                for (int64_t x = 0; x < s[2]; ++x) {
                    row += m_row[x] != 0;
                    cur[x + 1] = row + up[x + 1] + back[x + 1] - diag[x + 1];
                }
            }
    }
    // Sum over [lo, hi) (already clipped to the volume; empty ranges give 0).
    int64_t sum(const Index3& lo, const Index3& hi) const {
        for (int d = 0; d < 3; ++d)
            if (hi[d] <= lo[d]) return 0;
        const int64_t py = s_[2] + 1, pz = (s_[1] + 1) * py;
        const auto at = [&](int64_t z, int64_t y, int64_t x) { return t_[z * pz + y * py + x]; };
        return at(hi[0], hi[1], hi[2]) - at(lo[0], hi[1], hi[2]) - at(hi[0], lo[1], hi[2]) -
               at(hi[0], hi[1], lo[2]) + at(lo[0], lo[1], hi[2]) + at(lo[0], hi[1], lo[2]) +
               at(hi[0], lo[1], lo[2]) - at(lo[0], lo[1], lo[2]);
    }

  private:
    Index3 s_;
    std::vector<int64_t> t_;
};

struct Geometry {
    Index3 shape, half, end_offset, margin;
    // The inner part of the box centred at c (what counts as covered), clipped to the mask.
    void inner(const Index3& c, Index3& lo, Index3& hi) const {
        for (int d = 0; d < 3; ++d) {
            lo[d] = std::max<int64_t>(0, c[d] - half[d] + margin[d]);
            hi[d] = std::min<int64_t>(shape[d], c[d] + end_offset[d] - margin[d]);
        }
    }
    Box box(const Index3& c) const {
        Box b;
        for (int d = 0; d < 3; ++d) {
            b.lo[d] = c[d] - half[d];
            b.hi[d] = c[d] + end_offset[d];
        }
        return b;
    }
};

int64_t index(const Index3& s, const Index3& c) { return (c[0] * s[1] + c[1]) * s[2] + c[2]; }

void clearRange(std::vector<uint8_t>& m, const Index3& s, const Index3& lo, const Index3& hi) {
    for (int64_t z = lo[0]; z < hi[0]; ++z)
        for (int64_t y = lo[1]; y < hi[1]; ++y) {
            uint8_t* row = m.data() + (z * s[1] + y) * s[2];
            std::fill(row + lo[2], row + std::max(lo[2], hi[2]), uint8_t{0});
        }
}

bool anySet(const std::vector<uint8_t>& m) {
    return std::any_of(m.begin(), m.end(), [](uint8_t v) { return v != 0; });
}

// random_sampling_fallback: `n_samples` random nonzero voxels per box, the best kept.
void randomFallback(std::vector<uint8_t> mask, const Geometry& g, int n_samples, std::mt19937& rng,
                    std::vector<Box>& out) {
    while (anySet(mask)) {
        std::vector<Index3> indices;  // torch.nonzero order
        for (int64_t z = 0; z < g.shape[0]; ++z)
            for (int64_t y = 0; y < g.shape[1]; ++y)
                for (int64_t x = 0; x < g.shape[2]; ++x)
                    if (mask[index(g.shape, {z, y, x})]) indices.push_back({z, y, x});
        const BoxSums sums(mask, g.shape);
        int64_t best_covered = 0;
        std::optional<Index3> best;
        Index3 best_lo{}, best_hi{};
        for (int i = 0; i < n_samples; ++i) {
            const Index3 c = indices[static_cast<size_t>(
                numpyChoice(rng, static_cast<int64_t>(indices.size())))];
            Index3 lo, hi;
            g.inner(c, lo, hi);
            const int64_t covered = sums.sum(lo, hi);
            if (covered > best_covered) {
                best_covered = covered;
                best = c;
                best_lo = lo;
                best_hi = hi;
            }
        }
        if (!best) return;  // margins >= half the box: 2.6.0 fails here; nothing more to cover
        out.push_back(g.box(*best));
        clearRange(mask, g.shape, best_lo, best_hi);
    }
}

std::vector<Box> cover(const std::vector<uint8_t>& mask, const Geometry& g,
                       std::optional<Index3> stride, int max_depth, int depth, std::mt19937& rng) {
    std::vector<Box> boxes;
    if (!anySet(mask)) return boxes;
    if (depth > max_depth) {
        randomFallback(mask, g, 25, rng, boxes);
        return boxes;
    }
    const Index3& s = g.shape;
    Index3 mn{s[0], s[1], s[2]}, mx{-1, -1, -1};
    for (int64_t z = 0; z < s[0]; ++z)
        for (int64_t y = 0; y < s[1]; ++y)
            for (int64_t x = 0; x < s[2]; ++x)
                if (mask[index(s, {z, y, x})]) {
                    const Index3 c{z, y, x};
                    for (int d = 0; d < 3; ++d) {
                        mn[d] = std::min(mn[d], c[d]);
                        mx[d] = std::max(mx[d], c[d]);
                    }
                }
    if (!stride) {  // "auto"
        stride = Index3{};
        for (int d = 0; d < 3; ++d)
            (*stride)[d] =
                std::max<int64_t>(1, roundHalfEven(static_cast<double>(mx[d] - mn[d]) / 4.0));
    }
    std::vector<Index3> centers;  // torch.cartesian_prod order, kept where the mask is set
    for (int64_t z = mn[0]; z <= mx[0]; z += (*stride)[0])
        for (int64_t y = mn[1]; y <= mx[1]; y += (*stride)[1])
            for (int64_t x = mn[2]; x <= mx[2]; x += (*stride)[2])
                if (mask[index(s, {z, y, x})]) centers.push_back({z, y, x});
    if (centers.empty()) {
        Index3 half_stride;
        for (int d = 0; d < 3; ++d) half_stride[d] = std::max<int64_t>(1, (*stride)[d] / 2);
        return cover(mask, g, half_stride, max_depth, depth + 1, rng);
    }
    std::vector<uint8_t> uncovered(mask.size());
    for (size_t i = 0; i < mask.size(); ++i) uncovered[i] = mask[i] != 0;
    while (!centers.empty() && anySet(uncovered)) {
        const BoxSums sums(uncovered, s);
        int64_t best_covered = 0;
        size_t best = 0;
        Index3 best_lo{}, best_hi{};
        for (size_t i = 0; i < centers.size(); ++i) {
            Index3 lo, hi;
            g.inner(centers[i], lo, hi);
            const int64_t covered = sums.sum(lo, hi);
            if (covered > best_covered) {
                best_covered = covered;
                best = i;
                best_lo = lo;
                best_hi = hi;
            }
        }
        if (best_covered == 0) break;
        boxes.push_back(g.box(centers[best]));
        clearRange(uncovered, s, best_lo, best_hi);
        std::erase_if(centers, [&](const Index3& c) { return uncovered[index(s, c)] == 0; });
    }
    if (anySet(uncovered)) randomFallback(std::move(uncovered), g, 10, rng, boxes);
    return boxes;
}

}  // namespace

std::vector<Box> coverWithBoxes(const std::vector<uint8_t>& mask, const Index3& shape,
                                const Index3& box_size, const Index3& margin, int max_depth,
                                std::mt19937& rng) {
    Geometry g;
    g.shape = shape;
    g.margin = margin;
    for (int d = 0; d < 3; ++d) {
        g.half[d] = box_size[d] / 2;
        g.end_offset[d] = box_size[d] - g.half[d];
    }
    return cover(mask, g, std::nullopt, max_depth, 0, rng);
}

}  // namespace voxseg::edit::interactive
