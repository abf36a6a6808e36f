#include "pipeline/totalseg_statistics.h"

#include "pipeline/pixel_dispatch.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::pipeline {

namespace {

struct Accumulator {
    int64_t voxels = 0;
    int64_t sum = 0;  // of the int16 values: exact, as numpy's float64 sum of them is
    std::array<int64_t, 3> lo{std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::max()};
    std::array<int64_t, 3> hi{-1, -1, -1};
};

// `slot[value]`: the accumulator of a label value, or -1 for values no label names.
template <typename L, typename I>
void accumulate(const Volume& label_map, const I* image, const std::vector<int>& slot,
                std::vector<Accumulator>& acc) {
    const Geometry g = label_map.geometry();
    const L* lab = label_map.data<L>();
    int64_t idx = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i, ++idx) {
                const int s = slot[static_cast<size_t>(lab[idx])];
                if (s < 0) continue;
                Accumulator& a = acc[static_cast<size_t>(s)];
                ++a.voxels;
                a.sum += numpyInt16(static_cast<double>(image[idx]));
                const std::array<int64_t, 3> ijk{i, j, k};
                for (int d = 0; d < 3; ++d) {
                    a.lo[d] = std::min(a.lo[d], ijk[d]);
                    a.hi[d] = std::max(a.hi[d], ijk[d]);
                }
            }
}

}  // namespace

int16_t numpyInt16(double x) {
    // numpy casts through C's (npy_short)x, which x86-64 compiles to cvttsd2si (to int32:
    // INT32_MIN for NaN and values outside the int32 range) and keeps the low 16 bits.
    if (!(x > -2147483649.0 && x < 2147483648.0)) return 0;
    const auto truncated = static_cast<int32_t>(x);
    return static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint32_t>(truncated)));
}

double numpyRound5(double x) {
    // PyArray_Round for decimals > 0: multiply by 10^5, rint (half to even), divide by 10^5.
    const double scale = 100000.0;
    return std::nearbyint(x * scale) / scale;
}

bool touchesBorder(const std::array<int64_t, 3>& lo, const std::array<int64_t, 3>& hi,
                   const std::array<int64_t, 3>& size, int64_t voxels) {
    if (voxels <= 0) return false;
    for (int d = 0; d < 3; ++d)
        if (lo[d] < 3 || hi[d] >= size[d] - 3) return true;  // mask[:3] or mask[-3:]
    return false;
}

Result<std::vector<TotalSegLabelStatistics>> computeTotalSegStatistics(
    const Volume& label_map, const Volume& image, const std::vector<LabelInfo>& labels,
    bool exclude_at_border) {
    if (label_map.empty()) return invalidArgument("TotalSegmentator statistics: empty label map");
    if (!isLabelPixelType(label_map.pixelType()))
        return invalidArgument(
            std::string("TotalSegmentator statistics need a uint8/uint16 label map, not ") +
            pixelTypeName(label_map.pixelType()));
    const Geometry g = label_map.geometry();
    if (image.empty() || !image.geometry().approxEqual(g))
        return invalidArgument(
            "TotalSegmentator statistics: the image is not on the label map's grid; pass the "
            "original image the label map was computed on",
            image.info().source);

    std::vector<LabelInfo> sorted;
    for (const LabelInfo& l : labels)
        if (l.value > 0 && l.value <= 65535) sorted.push_back(l);
    std::sort(sorted.begin(), sorted.end(),
              [](const LabelInfo& a, const LabelInfo& b) { return a.value < b.value; });
    std::vector<int> slot(65536, -1);
    for (size_t i = 0; i < sorted.size(); ++i)
        slot[static_cast<size_t>(sorted[i].value)] = static_cast<int>(i);
    std::vector<Accumulator> acc(sorted.size());

    withPixelType(label_map.pixelType(), [&](auto ltag) {
        using L = decltype(ltag);
        if constexpr (std::is_same_v<L, uint8_t> || std::is_same_v<L, uint16_t>) {
            withPixelType(image.pixelType(), [&](auto itag) {
                using I = decltype(itag);
                accumulate<L, I>(label_map, image.data<I>(), slot, acc);
            });
        }
    });

    // nibabel's zooms are float32 and their product stays float32; count * it is float64.
    const float voxel_mm3 = static_cast<float>(g.spacing[0]) * static_cast<float>(g.spacing[1]) *
                            static_cast<float>(g.spacing[2]);
    std::vector<TotalSegLabelStatistics> out;
    for (size_t i = 0; i < sorted.size(); ++i) {
        const Accumulator& a = acc[i];
        TotalSegLabelStatistics s;
        s.value = sorted[i].value;
        s.name = sorted[i].name;
        s.voxels = a.voxels;
        s.touches_border = touchesBorder(a.lo, a.hi, g.size, a.voxels);
        if ((!s.touches_border || !exclude_at_border) && a.voxels > 0) {
            s.volume_mm3 = static_cast<double>(a.voxels) * static_cast<double>(voxel_mm3);
            s.intensity = numpyRound5(static_cast<double>(a.sum) / static_cast<double>(a.voxels));
        }
        out.push_back(std::move(s));
    }
    return out;
}

std::string totalSegStatisticsToJson(const std::vector<TotalSegLabelStatistics>& stats) {
    nlohmann::ordered_json root = nlohmann::ordered_json::object();
    for (const TotalSegLabelStatistics& s : stats) {
        nlohmann::ordered_json entry = nlohmann::ordered_json::object();
        entry["volume"] = s.volume_mm3;
        entry["intensity"] = s.intensity;
        root[s.name] = std::move(entry);
    }
    // json.dump(indent=4) with ensure_ascii: 4 spaces, non-ASCII escaped, no final newline.
    return root.dump(4, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace voxseg::pipeline
