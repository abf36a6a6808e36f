// generate_bounding_boxes / random_sampling_fallback of nnInteractive 2.6.0 (utils/bboxes.py),
// restated. Coverage counts use a summed-volume table of the uncovered voxels, rebuilt after
// each chosen box, instead of summing every candidate's box: same counts, less work.
#include "edit/interactive/refinement_boxes.h"

#include "edit/interactive/resample.h"

#include <algorithm>
#include <array>
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

bool anySet(const std::vector<uint8_t>& m) {
    return std::any_of(m.begin(), m.end(), [](uint8_t v) { return v != 0; });
}

int64_t countSet(const std::vector<uint8_t>& m, const Index3& s, const Index3& lo,
                 const Index3& hi) {
    int64_t n = 0;
    for (int64_t z = lo[0]; z < hi[0]; ++z)
        for (int64_t y = lo[1]; y < hi[1]; ++y) {
            const uint8_t* row = m.data() + (z * s[1] + y) * s[2];
            for (int64_t x = lo[2]; x < hi[2]; ++x) n += row[x] != 0;
        }
    return n;
}

// The set voxels of a mask by rank in torch.nonzero's order (linear index order): counts per
// block of 1024 voxels and per superblock of 1024 blocks, so that the k-th set voxel is found
// and covered voxels are dropped without rebuilding the list.
class RankedVoxels {
  public:
    explicit RankedVoxels(std::vector<uint8_t> mask) : m_(std::move(mask)) {
        blocks_.assign(m_.size() / kBlock + 1, 0);
        supers_.assign(blocks_.size() / kBlock + 1, 0);
        for (size_t i = 0; i < m_.size(); ++i)
            if (m_[i]) {
                m_[i] = 1;
                ++blocks_[i / kBlock];
                ++supers_[i / kBlock / kBlock];
                ++total_;
            }
    }
    int64_t total() const { return total_; }
    const std::vector<uint8_t>& mask() const { return m_; }
    int64_t kth(int64_t k) const {
        size_t s = 0;
        while (k >= supers_[s]) k -= supers_[s++];
        size_t b = s * kBlock;
        while (k >= blocks_[b]) k -= blocks_[b++];
        size_t i = b * kBlock;
        for (;; ++i)
            if (m_[i] && k-- == 0) return static_cast<int64_t>(i);
    }
    void clear(int64_t i) {
        if (!m_[i]) return;
        m_[i] = 0;
        --blocks_[i / kBlock];
        --supers_[i / kBlock / kBlock];
        --total_;
    }

  private:
    static constexpr size_t kBlock = 1024;
    std::vector<uint8_t> m_;
    std::vector<int64_t> blocks_, supers_;
    int64_t total_ = 0;
};

// random_sampling_fallback: `n_samples` random set voxels per box, the best kept.
void randomFallback(std::vector<uint8_t> mask, const Geometry& g, int n_samples, std::mt19937& rng,
                    std::vector<Box>& out) {
    RankedVoxels voxels(std::move(mask));
    const Index3& s = g.shape;
    while (voxels.total() > 0) {
        int64_t best_covered = 0;
        std::optional<Index3> best;
        Index3 best_lo{}, best_hi{};
        for (int i = 0; i < n_samples; ++i) {
            const int64_t v = voxels.kth(numpyChoice(rng, voxels.total()));
            const Index3 c{v / (s[1] * s[2]), (v / s[2]) % s[1], v % s[2]};
            Index3 lo, hi;
            g.inner(c, lo, hi);
            const int64_t covered = countSet(voxels.mask(), s, lo, hi);
            if (covered > best_covered) {
                best_covered = covered;
                best = c;
                best_lo = lo;
                best_hi = hi;
            }
        }
        if (!best) return;  // margins >= half the box: 2.6.0 fails here; nothing more to cover
        out.push_back(g.box(*best));
        for (int64_t z = best_lo[0]; z < best_hi[0]; ++z)
            for (int64_t y = best_lo[1]; y < best_hi[1]; ++y)
                for (int64_t x = best_lo[2]; x < best_hi[2]; ++x)
                    voxels.clear((z * s[1] + y) * s[2] + x);
    }
}

// The greedy cover's coverage counts: counts[i] = uncovered voxels in center i's inner box.
// Kept current by subtracting each voxel from the centers whose inner box holds it as it gets
// covered (every voxel is covered once), when few centers share a voxel; otherwise recounted
// per round from a summed-volume table.
class Coverage {
  public:
    Coverage(std::vector<uint8_t> uncovered, const Geometry& g, const std::vector<Index3>& centers,
             const Index3& origin, const Index3& stride)
        : g_(g), u_(std::move(uncovered)), centers_(centers), origin_(origin), stride_(stride) {
        for (uint8_t v : u_) remaining_ += v;
        int64_t share = 1;
        for (int d = 0; d < 3; ++d) {
            const int64_t inner = g.half[d] + g.end_offset[d] - 2 * g.margin[d];
            share *= std::max<int64_t>(1, (inner + stride[d] - 1) / stride[d] + 1);
        }
        incremental_ = share <= 64;
        counts_.resize(centers.size());
        recount();
        if (!incremental_) return;
        for (int d = 0; d < 3; ++d) {
            n_[d] = 0;
            for (const Index3& c : centers)
                n_[d] = std::max<int64_t>(n_[d], (c[d] - origin[d]) / stride[d] + 1);
            // Centers c = origin + k * stride whose inner box holds coordinate v:
            // v - end_offset + margin < c <= v + half - margin.
            k_lo_[d].resize(static_cast<size_t>(g.shape[d]));
            k_hi_[d].resize(static_cast<size_t>(g.shape[d]));
            for (int64_t v = 0; v < g.shape[d]; ++v) {
                const int64_t a = v - g.end_offset[d] + g.margin[d] + 1 - origin[d];
                const int64_t b = v + g.half[d] - g.margin[d] - origin[d];
                k_lo_[d][v] = std::max<int64_t>(0, a <= 0 ? 0 : (a + stride[d] - 1) / stride[d]);
                k_hi_[d][v] = b < 0 ? -1 : std::min<int64_t>(n_[d] - 1, b / stride[d]);
            }
        }
        grid_.assign(static_cast<size_t>(n_[0] * n_[1] * n_[2]), -1);
        for (size_t i = 0; i < centers.size(); ++i) {
            const Index3& c = centers[i];
            grid_[static_cast<size_t>(
                (((c[0] - origin[0]) / stride[0]) * n_[1] + (c[1] - origin[1]) / stride[1]) *
                    n_[2] +
                (c[2] - origin[2]) / stride[2])] = static_cast<int64_t>(i);
        }
    }

    int64_t count(size_t i) const { return counts_[i]; }
    int64_t remaining() const { return remaining_; }
    bool uncovered(const Index3& c) const { return u_[index(g_.shape, c)] != 0; }
    std::vector<uint8_t>& mask() { return u_; }

    // Marks [lo, hi) covered.
    void clear(const Index3& lo, const Index3& hi) {
        const Index3& s = g_.shape;
        for (int64_t z = lo[0]; z < hi[0]; ++z)
            for (int64_t y = lo[1]; y < hi[1]; ++y)
                for (int64_t x = lo[2]; x < hi[2]; ++x) {
                    uint8_t& v = u_[(z * s[1] + y) * s[2] + x];
                    if (!v) continue;
                    v = 0;
                    --remaining_;
                    if (incremental_) forget({z, y, x});
                }
        if (!incremental_) recount();
    }

  private:
    void recount() {
        const BoxSums sums(u_, g_.shape);
        for (size_t i = 0; i < centers_.size(); ++i) {
            Index3 lo, hi;
            g_.inner(centers_[i], lo, hi);
            counts_[i] = sums.sum(lo, hi);
        }
    }
    void forget(const Index3& v) {
        for (int64_t a = k_lo_[0][v[0]]; a <= k_hi_[0][v[0]]; ++a)
            for (int64_t b = k_lo_[1][v[1]]; b <= k_hi_[1][v[1]]; ++b)
                for (int64_t c = k_lo_[2][v[2]]; c <= k_hi_[2][v[2]]; ++c) {
                    const int64_t i = grid_[static_cast<size_t>((a * n_[1] + b) * n_[2] + c)];
                    if (i >= 0) --counts_[static_cast<size_t>(i)];
                }
    }

    const Geometry& g_;
    std::vector<uint8_t> u_;
    std::vector<Index3> centers_;
    Index3 origin_, stride_, n_{};
    std::array<std::vector<int64_t>, 3> k_lo_, k_hi_;
    std::vector<int64_t> grid_;
    std::vector<int64_t> counts_;
    int64_t remaining_ = 0;
    bool incremental_ = false;
};

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
    Coverage cov(std::move(uncovered), g, centers, mn, *stride);
    std::vector<size_t> alive(centers.size());  // candidate order, as potential_centers
    for (size_t i = 0; i < alive.size(); ++i) alive[i] = i;
    while (!alive.empty() && cov.remaining() > 0) {
        int64_t best_covered = 0;
        size_t best = 0;
        for (const size_t i : alive)
            if (cov.count(i) > best_covered) {
                best_covered = cov.count(i);
                best = i;
            }
        if (best_covered == 0) break;
        boxes.push_back(g.box(centers[best]));
        Index3 lo, hi;
        g.inner(centers[best], lo, hi);
        cov.clear(lo, hi);
        std::erase_if(alive, [&](size_t i) { return !cov.uncovered(centers[i]); });
    }
    if (cov.remaining() > 0) randomFallback(std::move(cov.mask()), g, 10, rng, boxes);
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
