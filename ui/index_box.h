// An index-space box of a volume (inclusive bounds), as edits report what they changed.
// Qt-free.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace voxseg::ui {

// Empty when lo > hi on any axis.
struct IndexBox {
    std::array<int64_t, 3> lo{0, 0, 0};
    std::array<int64_t, 3> hi{-1, -1, -1};
    bool empty() const { return lo[0] > hi[0] || lo[1] > hi[1] || lo[2] > hi[2]; }
    int64_t voxels() const {
        if (empty()) return 0;
        return (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1);
    }
};

// The smallest box holding both (an empty one adds nothing).
inline IndexBox unite(const IndexBox& a, const IndexBox& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    IndexBox u;
    for (int i = 0; i < 3; ++i) {
        u.lo[i] = std::min(a.lo[i], b.lo[i]);
        u.hi[i] = std::max(a.hi[i], b.hi[i]);
    }
    return u;
}

}  // namespace voxseg::ui
