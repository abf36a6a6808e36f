#include "edit/interactive/torch_sum.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace voxseg::edit::interactive {

namespace {

constexpr int64_t kGrainSize = 32768;  // at::internal::GRAIN_SIZE
constexpr int kMaxLanes = 16;

// A vector accumulator of `lanes` floats (Vectorized<float>), added lane-wise.
struct Lanes {
    std::array<float, kMaxLanes> v{};
    Lanes& operator+=(const Lanes& o) {
        for (int i = 0; i < kMaxLanes; ++i) v[i] += o.v[i];
        return *this;
    }
};

void add(float& a, float b) { a += b; }
void add(Lanes& a, const Lanes& b) { a += b; }

int64_t ceilLog2(int64_t x) {
    if (x <= 2) return 1;
    int64_t bits = 0;
    for (uint64_t u = static_cast<uint64_t>(x - 1); u; u >>= 1) ++bits;
    return bits;
}

// multi_row_sum: `nrows` accumulators over `size` steps, in up to 4 levels (cascade).
template <typename Acc, typename Load>
std::array<Acc, 4> multiRowSum(int64_t size, const Load& load) {
    constexpr int kLevels = 4;
    const int64_t level_power = std::max<int64_t>(4, ceilLog2(size) / kLevels);
    const int64_t level_step = int64_t{1} << level_power;
    const int64_t level_mask = level_step - 1;
    Acc acc[kLevels][4] = {};
    int64_t i = 0;
    while (i + level_step <= size) {
        for (int64_t j = 0; j < level_step; ++j, ++i)
            for (int k = 0; k < 4; ++k) add(acc[0][k], load(i, k));
        for (int j = 1; j < kLevels; ++j) {
            for (int k = 0; k < 4; ++k) {
                add(acc[j][k], acc[j - 1][k]);
                acc[j - 1][k] = Acc{};
            }
            if ((i & (level_mask << (j * level_power))) != 0) break;
        }
    }
    for (; i < size; ++i)
        for (int k = 0; k < 4; ++k) add(acc[0][k], load(i, k));
    for (int j = 1; j < kLevels; ++j)
        for (int k = 0; k < 4; ++k) add(acc[0][k], acc[j][k]);
    return {acc[0][0], acc[0][1], acc[0][2], acc[0][3]};
}

// row_sum: `size` items viewed as (-1, 4), their 4 column sums, the leftover items, then the
// columns added into the first.
template <typename Acc, typename Load>
Acc rowSum(int64_t size, const Load& load) {
    const int64_t size_ilp = size / 4;
    std::array<Acc, 4> p =
        multiRowSum<Acc>(size_ilp, [&](int64_t i, int k) { return load(i * 4 + k); });
    for (int64_t i = size_ilp * 4; i < size; ++i) add(p[0], load(i));
    for (int k = 1; k < 4; ++k) add(p[0], p[k]);
    return p[0];
}

// One contiguous row: vectorized_inner_sum when it holds a whole vector, else the scalar path.
float innerSum(const float* row, int64_t n, int lanes) {
    if (n < lanes) return rowSum<float>(n, [&](int64_t i) { return row[i]; });
    const int64_t vectors = n / lanes;
    const Lanes vec = rowSum<Lanes>(vectors, [&](int64_t i) {
        Lanes l;
        std::copy(row + i * lanes, row + (i + 1) * lanes, l.v.begin());
        return l;
    });
    float total = 0.0f;
    for (int64_t k = vectors * lanes; k < n; ++k) total += row[k];
    for (int k = 0; k < lanes; ++k) total += vec.v[k];
    return total;
}

// Calls fn(pointer, count) for the runs of consecutive x of box elements [begin, end) (x
// fastest): a partial first row, whole rows, a partial last row, as TensorIterator's
// serial_for_each hands them to the loop.
template <typename Fn>
void forEachRun(const float* values, Index3 shape, const Box& box, int64_t begin, int64_t end,
                Fn&& fn) {
    const int64_t nx = box.hi[2] - box.lo[2], ny = box.hi[1] - box.lo[1];
    for (int64_t i = begin; i < end;) {
        const int64_t x = i % nx, y = (i / nx) % ny, z = i / (nx * ny);
        const int64_t n = std::min(nx - x, end - i);
        const float* p =
            values + ((box.lo[0] + z) * shape[1] + box.lo[1] + y) * shape[2] + box.lo[2] + x;
        fn(p, n);
        i += n;
    }
}

// invoke_parallel's chunks of [0, n): min(threads, ceil(n / grain)) chunks of ceil(n / chunks).
std::vector<std::pair<int64_t, int64_t>> chunks(int64_t n, int threads) {
    const int64_t t = std::min<int64_t>(threads, (n + kGrainSize - 1) / kGrainSize);
    const int64_t size = (n + t - 1) / t;
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t b = 0; b < n; b += size) out.emplace_back(b, std::min(n, b + size));
    return out;
}

int64_t count(const Box& box) {
    return (box.hi[0] - box.lo[0]) * (box.hi[1] - box.lo[1]) * (box.hi[2] - box.lo[2]);
}

}  // namespace

float torchSum(const float* values, Index3 shape, const Box& box, int threads, int vector_width) {
    const int lanes = std::clamp(vector_width, 1, kMaxLanes);
    const int64_t n = count(box);
    auto sum = [&](int64_t b, int64_t e) {
        float out = 0.0f;
        forEachRun(values, shape, box, b, e,
                   [&](const float* p, int64_t len) { out += innerSum(p, len, lanes); });
        return out;
    };
    if (n < kGrainSize || threads <= 1) return sum(0, n);
    float total = 0.0f;
    for (const auto& [b, e] : chunks(n, threads)) total += sum(b, e);
    return total;
}

float torchStd(const float* values, Index3 shape, const Box& box, float mean, int threads) {
    const int64_t n = count(box);
    const double m = mean;
    auto squares = [&](int64_t b, int64_t e) {
        double s = 0.0;
        forEachRun(values, shape, box, b, e, [&](const float* p, int64_t len) {
            for (int64_t i = 0; i < len; ++i) {
                const double d = static_cast<double>(p[i]) - m;
                s += d * d;
            }
        });
        return s;
    };
    double total = 0.0;
    if (n <= kGrainSize || threads <= 1) {
        total = squares(0, n);
    } else {
        for (const auto& [b, e] : chunks(n, threads)) total += squares(b, e);
    }
    return static_cast<float>(std::sqrt(total / std::max(0.0, static_cast<double>(n - 1))));
}

}  // namespace voxseg::edit::interactive
