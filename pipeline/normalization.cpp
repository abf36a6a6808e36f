#include "pipeline/normalization.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace voxseg::pipeline {

namespace {

// Population (ddof 0) or sample (ddof 1) mean and std of x[0..count), in double.
std::pair<double, double> meanStd(const float* x, int64_t count, int ddof) {
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(count);
    double sq = 0.0;
    for (int64_t i = 0; i < count; ++i) {
        const double d = x[i] - mean;
        sq += d * d;
    }
    const double denom = static_cast<double>(std::max<int64_t>(1, count - ddof));
    return {mean, std::sqrt(sq / denom)};
}

}  // namespace

Result<std::array<double, 2>> percentileValues(const Volume& volume, double low, double high) {
    if (volume.empty()) return invalidArgument("percentiles: empty volume");
    if (!(low >= 0 && low <= high && high <= 100))
        return invalidArgument("percentiles must satisfy 0 <= low <= high <= 100");
    Volume f =
        volume.pixelType() == PixelType::kFloat32 ? volume : volume.castTo(PixelType::kFloat32);
    const int64_t n = f.geometry().voxelCount();
    std::vector<float> v(f.data<float>(), f.data<float>() + n);
    for (float& x : v)
        if (std::isnan(x)) x = 0.0f;
    std::array<double, 2> out{};
    const double q[2] = {low / 100.0, high / 100.0};
    for (int e = 0; e < 2; ++e) {
        const double rank = q[e] * static_cast<double>(n - 1);
        const auto below = static_cast<int64_t>(std::floor(rank));
        const int64_t above = std::min(below + 1, n - 1);
        std::nth_element(v.begin(), v.begin() + below, v.end());
        const double a = v[static_cast<size_t>(below)];
        double b = a;
        if (above != below) b = *std::min_element(v.begin() + below + 1, v.end());
        out[e] = a + (b - a) * (rank - static_cast<double>(below));
    }
    return out;
}

Result<Volume> normalize(const Volume& volume, const Normalization& n, const Volume* mask,
                         const std::array<double, 2>* percentile_values) {
    if (volume.empty()) return invalidArgument("normalize: empty volume");
    const uint8_t* mask_data = nullptr;
    if (n.scheme == Normalization::Scheme::kZScore && n.nonzero_mask && mask) {
        if (mask->pixelType() != PixelType::kUInt8 ||
            mask->geometry().size != volume.geometry().size)
            return invalidArgument("normalize: the mask must be uint8 on the image's grid");
        mask_data = mask->data<uint8_t>();
    }
    if (n.scheme == Normalization::Scheme::kCT && !(n.clip_low <= n.clip_high))
        return invalidArgument("normalize: ct clip range [lo, hi] has lo > hi");

    Volume out = volume.pixelType() == PixelType::kFloat32 ? cloneVolume(volume)
                                                           : volume.castTo(PixelType::kFloat32);
    float* x = out.data<float>();
    const int64_t count = out.geometry().voxelCount();

    switch (n.scheme) {
        case Normalization::Scheme::kNone:
            break;
        case Normalization::Scheme::kPercentile:
        case Normalization::Scheme::kWindow: {
            double lo = n.clip_low, hi = n.clip_high;
            if (n.scheme == Normalization::Scheme::kPercentile) {
                std::array<double, 2> values{};
                if (percentile_values) {
                    values = *percentile_values;
                } else {
                    VOXSEG_ASSIGN_OR_RETURN(
                        values, percentileValues(out, n.percentile_low, n.percentile_high));
                }
                lo = values[0], hi = values[1];
            }
            // deepbet: (x - low) / (high - low), clamped to [0, 1]; a range maps [lo, hi] onto it.
            const bool ranged = n.has_range && hi > lo;
            const double scale = ranged ? (n.range_high - n.range_low) / (hi - lo) : 1.0;
            for (int64_t i = 0; i < count; ++i) {
                const double v = std::isnan(x[i]) ? 0.0 : static_cast<double>(x[i]);
                const double c = std::clamp(v, lo, hi);
                x[i] = static_cast<float>(ranged ? n.range_low + (c - lo) * scale : c);
            }
            double shift = 0.0, mul = 1.0;
            if (n.zscore && count > 0) {
                const auto [mean, std_dev] = meanStd(x, count, n.std_ddof);
                shift = mean;
                mul = 1.0 / std::max(std_dev, kMinStd);
            }
            for (int64_t i = 0; i < count; ++i)
                x[i] = static_cast<float>(((x[i] - shift) * mul) * n.affine_scale + n.affine_shift);
            break;
        }
        case Normalization::Scheme::kCT: {
            const double inv_std = 1.0 / std::max(n.std, kMinStd);
            for (int64_t i = 0; i < count; ++i) {
                const double v = std::clamp(static_cast<double>(x[i]), n.clip_low, n.clip_high);
                x[i] = static_cast<float>((v - n.mean) * inv_std);
            }
            break;
        }
        case Normalization::Scheme::kZScore: {
            auto inside = [&](int64_t i) {
                if (!n.nonzero_mask) return true;
                return mask_data ? mask_data[i] != 0 : x[i] != 0.0f;
            };
            // Two passes (mean, then squared deviations): stable for large CT offsets.
            double sum = 0.0;
            int64_t m = 0;
            for (int64_t i = 0; i < count; ++i)
                if (inside(i)) sum += x[i], ++m;
            if (m == 0) break;  // all-zero image under a nonzero mask: nothing to normalise
            const double mean = sum / static_cast<double>(m);
            double sq = 0.0;
            for (int64_t i = 0; i < count; ++i)
                if (inside(i)) {
                    const double d = x[i] - mean;
                    sq += d * d;
                }
            const double inv_std = 1.0 / std::max(std::sqrt(sq / static_cast<double>(m)), kMinStd);
            // Decide membership before overwriting: the mask may be x != 0 itself.
            for (int64_t i = 0; i < count; ++i)
                if (inside(i)) x[i] = static_cast<float>((x[i] - mean) * inv_std);
            break;
        }
    }
    return out;
}

}  // namespace voxseg::pipeline
