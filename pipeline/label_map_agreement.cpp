// Agreement of two label maps (label_map_agreement.h): one pass over both.
#include "pipeline/label_map_agreement.h"

#include <fmt/format.h>

#include <unordered_map>

namespace voxseg::pipeline {

namespace {
bool isLabelType(PixelType t) { return t != PixelType::kFloat32 && t != PixelType::kFloat64; }
}  // namespace

Result<LabelMapAgreement> compareLabelMaps(const Volume& reference, const Volume& candidate,
                                           const std::vector<int>& labels) {
    if (reference.empty() || candidate.empty())
        return invalidArgument("label map agreement: a label map is empty");
    if (!isLabelType(reference.pixelType()) || !isLabelType(candidate.pixelType()))
        return invalidArgument("label map agreement: label maps need integer voxels");
    const Geometry g = reference.geometry(), gc = candidate.geometry();
    if (g.size != gc.size)
        return invalidArgument(fmt::format(
            "label map agreement: the grids differ ({}x{}x{} vs {}x{}x{}): both must label the "
            "same image",
            g.size[0], g.size[1], g.size[2], gc.size[0], gc.size[1], gc.size[2]));
    LabelMapAgreement out;
    std::unordered_map<int64_t, size_t> index;
    for (int v : labels) {
        index.emplace(v, out.labels.size());
        out.labels.push_back({v});
    }
    const int64_t n = g.voxelCount();
    out.voxels = n;
    visitPixels(reference, [&](const auto* r) {
        visitPixels(candidate, [&](const auto* c) {
            for (int64_t i = 0; i < n; ++i) {
                const auto vr = static_cast<int64_t>(r[i]);
                const auto vc = static_cast<int64_t>(c[i]);
                if (vr == vc) {
                    ++out.same;
                    if (auto it = index.find(vr); it != index.end()) {
                        LabelDice& d = out.labels[it->second];
                        ++d.voxels_reference;
                        ++d.voxels_candidate;
                        ++d.voxels_both;
                    }
                    continue;
                }
                if (auto it = index.find(vr); it != index.end())
                    ++out.labels[it->second].voxels_reference;
                if (auto it = index.find(vc); it != index.end())
                    ++out.labels[it->second].voxels_candidate;
            }
        });
    });
    for (LabelDice& d : out.labels)
        if (d.voxels_reference + d.voxels_candidate > 0)
            d.dice = 2.0 * static_cast<double>(d.voxels_both) /
                     static_cast<double>(d.voxels_reference + d.voxels_candidate);
    return out;
}

}  // namespace voxseg::pipeline
