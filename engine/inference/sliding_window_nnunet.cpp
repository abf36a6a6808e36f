#include "engine/inference/sliding_window_nnunet.h"

#include "engine/graph/tensor.h"
#include "engine/inference/half_kernels.h"
#include "engine/inference/half_kernels_impl.h"
#include "engine/inference/sliding_window_nnunet_impl.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace voxseg::engine::nnunet_fp16 {
namespace {

// numpy's pairwise summation of float64 (pairwise_sum in loops_utils.h.src), as ndarray.sum()
// reduces a contiguous array: the first element, plus the pairwise sum of the rest.
double pairwiseSum(const double* a, int64_t n) {
    if (n < 8) {
        double res = 0.0;
        for (int64_t i = 0; i < n; ++i) res += a[i];
        return res;
    }
    if (n <= 128) {
        std::array<double, 8> r{};
        for (int j = 0; j < 8; ++j) r[static_cast<size_t>(j)] = a[j];
        int64_t i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[static_cast<size_t>(j)] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwiseSum(a, n2) + pairwiseSum(a + n2, n - n2);
}

// scipy.ndimage._filters._gaussian_kernel1d(sigma, 0, radius): exp(-0.5 / sigma^2 * x^2) over
// x = -radius..radius, divided by its sum.
std::vector<double> scipyKernel(double sigma, int64_t radius) {
    const double sigma2 = sigma * sigma;
    const double factor = -0.5 / sigma2;
    std::vector<double> phi(static_cast<size_t>(2 * radius + 1));
    for (int64_t i = 0; i < 2 * radius + 1; ++i) {
        const int64_t x = i - radius;
        phi[static_cast<size_t>(i)] = std::exp(factor * static_cast<double>(x * x));
    }
    const double sum =
        phi.size() > 1 ? phi[0] + pairwiseSum(phi.data() + 1, phi.size() - 1) : phi[0];
    for (double& v : phi) v = v / sum;
    return phi;
}

// gaussian_filter1d of a delta at patch // 2 along one axis: the kernel's weight at each index
// (0 beyond the radius; mode constant pads with zeros).
std::vector<double> axisWeights(int64_t patch, double sigma_scale) {
    const double sigma = static_cast<double>(patch) * sigma_scale;
    const int64_t radius = static_cast<int64_t>(4.0 * sigma + 0.5);
    const std::vector<double> phi = scipyKernel(sigma, radius);
    const int64_t center = patch / 2;
    std::vector<double> w(static_cast<size_t>(patch), 0.0);
    for (int64_t i = 0; i < patch; ++i) {
        const int64_t d = i - center;
        if (d >= -radius && d <= radius)
            w[static_cast<size_t>(i)] = phi[static_cast<size_t>(d + radius)];
    }
    return w;
}

inline float toFloat(const float* table, uint16_t h) { return table[h]; }

}  // namespace

std::vector<uint16_t> importanceMap(const std::vector<int64_t>& patch, double sigma_scale,
                                    bool gaussian) {
    int64_t voxels = 1;
    for (int64_t p : patch) voxels *= p;
    if (!gaussian) return std::vector<uint16_t>(static_cast<size_t>(voxels), floatToHalf(1.0f));
    // Filtering a delta axis after axis multiplies the running value by one weight per axis
    // (the other taps see zeros), rounding after each product: ((w0 * w1) * w2).
    std::vector<double> map(static_cast<size_t>(voxels), 1.0);
    int64_t inner = voxels;
    for (int64_t p : patch) {
        const std::vector<double> w = axisWeights(p, sigma_scale);
        inner /= p;
        for (int64_t i = 0; i < voxels; ++i)
            map[static_cast<size_t>(i)] *= w[static_cast<size_t>((i / inner) % p)];
    }
    const double max_value = *std::max_element(map.begin(), map.end());
    const double divisor = max_value / 10.0;  // value_scaling_factor
    std::vector<uint16_t> out(map.size());
    for (size_t i = 0; i < map.size(); ++i)
        out[i] = floatToHalf(static_cast<float>(map[i] / divisor));  // torch: f64 -> f32 -> f16
    uint16_t smallest = std::numeric_limits<uint16_t>::max();
    for (uint16_t h : out)
        if (h != 0) smallest = std::min(smallest, h);  // positive halves order as integers
    for (uint16_t& h : out)
        if (h == 0) h = smallest;
    return out;
}

namespace generic {

void addWeightsRow(uint16_t* n, const uint16_t* g, int64_t count) {
    const float* t = half::toFloatTable();
    for (int64_t x = 0; x < count; ++x) n[x] = floatToHalf(toFloat(t, n[x]) + toFloat(t, g[x]));
}

void addPredictionRow(uint16_t* acc, const float* p, const uint16_t* g, int64_t count) {
    const float* t = half::toFloatTable();
    for (int64_t x = 0; x < count; ++x) {
        const float weighted = p[x] * toFloat(t, g[x]);  // stored as float32 by torch
        acc[x] = floatToHalf(toFloat(t, acc[x]) + weighted);
    }
}

bool divideRow(uint16_t* acc, const uint16_t* n, int64_t count) {
    const float* t = half::toFloatTable();
    bool finite = true;
    for (int64_t x = 0; x < count; ++x) {
        acc[x] = floatToHalf(toFloat(t, acc[x]) / toFloat(t, n[x]));
        finite = finite && (acc[x] & 0x7c00u) != 0x7c00u;
    }
    return finite;
}

void addRow(uint16_t* a, const uint16_t* b, int64_t count) {
    const float* t = half::toFloatTable();
    for (int64_t x = 0; x < count; ++x) a[x] = floatToHalf(toFloat(t, a[x]) + toFloat(t, b[x]));
}

void divideRowBy(uint16_t* a, int64_t count, int divisor) {
    const float* t = half::toFloatTable();
    const float d = static_cast<float>(divisor);
    for (int64_t x = 0; x < count; ++x) a[x] = floatToHalf(toFloat(t, a[x]) / d);
}

}  // namespace generic

void addWeightsRow(uint16_t* n, const uint16_t* g, int64_t count) {
    VOXSEG_F16C_DISPATCH(addWeightsRow(n, g, count));
}
void addPredictionRow(uint16_t* acc, const float* p, const uint16_t* g, int64_t count) {
    VOXSEG_F16C_DISPATCH(addPredictionRow(acc, p, g, count));
}
bool divideRow(uint16_t* acc, const uint16_t* n, int64_t count) {
    VOXSEG_F16C_DISPATCH(divideRow(acc, n, count));
}
void addRow(uint16_t* a, const uint16_t* b, int64_t count) {
    VOXSEG_F16C_DISPATCH(addRow(a, b, count));
}
void divideRowBy(uint16_t* a, int64_t count, int divisor) {
    VOXSEG_F16C_DISPATCH(divideRowBy(a, count, divisor));
}

uint16_t doubleToHalf(double v) {
    // Round to float32 with round-to-odd (truncate, then set the last bit when inexact), then to
    // float16 to nearest even: with 13 spare bits this is the float64 value rounded once.
    if (!std::isfinite(v)) return floatToHalf(static_cast<float>(v));
    float f = static_cast<float>(v);
    if (std::abs(static_cast<double>(f)) > std::abs(v)) f = std::nextafter(f, 0.0f);
    if (static_cast<double>(f) != v) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        bits |= 1u;
        std::memcpy(&f, &bits, 4);
    }
    return floatToHalf(f);
}

}  // namespace voxseg::engine::nnunet_fp16
