#include "pipeline/normalization.h"

#include <algorithm>
#include <cmath>

namespace voxseg::pipeline {

Result<Volume> normalize(const Volume& volume, const Normalization& n, const Volume* mask) {
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
