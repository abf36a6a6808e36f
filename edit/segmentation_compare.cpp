#include "edit/segmentation_compare.h"

#include <fmt/format.h>

#include <map>
#include <type_traits>

namespace voxseg::edit {
namespace {

bool isIntegerType(PixelType t) { return t != PixelType::kFloat32 && t != PixelType::kFloat64; }

struct Counts {
    int64_t a = 0, b = 0, both = 0;
};

}  // namespace

Result<std::vector<LabelAgreement>> compareSegmentations(const Volume& a, const Volume& b) {
    if (a.empty() || b.empty())
        return invalidArgument("compare segmentations: a label map is empty");
    for (const Volume* v : {&a, &b})
        if (!isIntegerType(v->pixelType()))
            return invalidArgument(
                fmt::format("compare segmentations: a label map needs integer voxels, not {}",
                            pixelTypeName(v->pixelType())),
                v->info().source);
    const Geometry ga = a.geometry(), gb = b.geometry();
    if (ga.size != gb.size)
        return invalidArgument(
            fmt::format("compare segmentations: the grids differ ({}x{}x{} vs {}x{}x{}); both "
                        "must be segmentations of the same image",
                        ga.size[0], ga.size[1], ga.size[2], gb.size[0], gb.size[1], gb.size[2]),
            b.info().source);
    if (!ga.approxEqual(gb, 1e-3, 1e-5, 1e-5))
        return invalidArgument(
            "compare segmentations: same size but another origin, spacing or direction; both "
            "must be segmentations of the same image",
            b.info().source);
    std::map<int64_t, Counts> counts;
    const int64_t n = ga.voxelCount();
    visitPixels(a, [&](const auto* pa) {
        visitPixels(b, [&](const auto* pb) {
            for (int64_t i = 0; i < n; ++i) {
                const auto va = static_cast<int64_t>(pa[i]);
                const auto vb = static_cast<int64_t>(pb[i]);
                if (va == vb) {
                    if (va != 0) {
                        Counts& c = counts[va];
                        ++c.a;
                        ++c.b;
                        ++c.both;
                    }
                    continue;
                }
                if (va != 0) ++counts[va].a;
                if (vb != 0) ++counts[vb].b;
            }
        });
    });
    const double voxel_ml = ga.spacing[0] * ga.spacing[1] * ga.spacing[2] / 1000.0;
    std::vector<LabelAgreement> out;
    for (const auto& [value, c] : counts) {
        LabelAgreement r;
        r.label = static_cast<int>(value);
        r.voxels_a = c.a;
        r.voxels_b = c.b;
        r.voxels_both = c.both;
        r.dice = 2.0 * static_cast<double>(c.both) / static_cast<double>(c.a + c.b);
        r.volume_a_ml = static_cast<double>(c.a) * voxel_ml;
        r.volume_b_ml = static_cast<double>(c.b) * voxel_ml;
        r.volume_difference_ml = r.volume_b_ml - r.volume_a_ml;
        if (c.a > 0)
            r.volume_difference_percent =
                100.0 * static_cast<double>(c.b - c.a) / static_cast<double>(c.a);
        out.push_back(r);
    }
    return out;
}

}  // namespace voxseg::edit
