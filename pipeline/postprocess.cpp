#include "pipeline/postprocess.h"

#include "pipeline/pixel_dispatch.h"

#include <itkBinaryFillholeImageFilter.h>
#include <itkConnectedComponentImageFilter.h>
#include <itkRelabelComponentImageFilter.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace voxseg::pipeline {

namespace {

using Mask = Image3<uint8_t>;
using Components = Image3<uint32_t>;

Status checkLabelMap(const Volume& v) {
    if (v.empty()) return invalidArgument("post-processing: empty label map");
    if (!isLabelPixelType(v.pixelType()))
        return invalidArgument(std::string("post-processing needs a uint8/uint16 label map, not ") +
                               pixelTypeName(v.pixelType()));
    return Status::ok();
}

template <typename T>
Mask::Pointer maskOf(const Volume& v, int label) {
    auto mask = Mask::New();
    mask->SetRegions(v.base()->GetLargestPossibleRegion());
    mask->CopyInformation(v.base());
    mask->Allocate();
    const T* src = v.data<T>();
    uint8_t* dst = mask->GetBufferPointer();
    const int64_t n = v.geometry().voxelCount();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] == static_cast<T>(label) ? 1 : 0;
    return mask;
}

// Labels components of `label` by size (1 = largest) and removes those `drop` rejects.
template <typename DropFn>
Result<PostprocessReport> filterComponents(Volume& label_map, int label, bool fully_connected,
                                           int64_t min_voxels, DropFn drop) {
    VOXSEG_RETURN_IF_ERROR(checkLabelMap(label_map));
    PostprocessReport report;
    report.label = label;
    try {
        return withPixelType(label_map.pixelType(), [&](auto tag) -> Result<PostprocessReport> {
            using T = decltype(tag);
            if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>) {
                auto cc = itk::ConnectedComponentImageFilter<Mask, Components>::New();
                cc->SetInput(maskOf<T>(label_map, label));
                cc->SetFullyConnected(fully_connected);
                cc->SetBackgroundValue(0);
                auto relabel = itk::RelabelComponentImageFilter<Components, Components>::New();
                relabel->SetInput(cc->GetOutput());
                relabel->SetMinimumObjectSize(0);
                relabel->Update();
                report.components_before = static_cast<int>(relabel->GetNumberOfObjects());
                const auto& sizes = relabel->GetSizeOfObjectsInPixels();
                const uint32_t* comp = relabel->GetOutput()->GetBufferPointer();
                T* dst = label_map.data<T>();
                const int64_t n = label_map.geometry().voxelCount();
                for (int64_t i = 0; i < n; ++i) {
                    const uint32_t c = comp[i];
                    if (c == 0) continue;
                    if (drop(c, static_cast<int64_t>(sizes[c - 1]), min_voxels)) {
                        dst[i] = 0;
                        ++report.voxels_removed;
                    }
                }
            }
            return report;
        });
    } catch (const std::exception& e) {
        return internalError(std::string("connected components failed: ") + e.what());
    }
}

}  // namespace

Result<PostprocessReport> keepLargestComponent(Volume& label_map, int label, bool fully_connected) {
    return filterComponents(label_map, label, fully_connected, 0,
                            [](uint32_t c, int64_t, int64_t) { return c > 1; });
}

Result<PostprocessReport> removeSmallComponents(Volume& label_map, int label, double min_ml,
                                                bool fully_connected) {
    if (min_ml < 0) return invalidArgument("minimum component size must be >= 0 mL");
    const Vec3 s = label_map.geometry().spacing;
    const double voxel_ml = s[0] * s[1] * s[2] / 1000.0;
    const auto min_voxels = static_cast<int64_t>(std::ceil(min_ml / voxel_ml - 1e-9));
    return filterComponents(label_map, label, fully_connected, min_voxels,
                            [](uint32_t, int64_t size, int64_t min) { return size < min; });
}

Result<PostprocessReport> fillHoles(Volume& label_map, int label, HoleFilling mode) {
    VOXSEG_RETURN_IF_ERROR(checkLabelMap(label_map));
    PostprocessReport report;
    report.label = label;
    if (mode == HoleFilling::kNone) return report;
    try {
        return withPixelType(label_map.pixelType(), [&](auto tag) -> Result<PostprocessReport> {
            using T = decltype(tag);
            if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>) {
                Mask::Pointer mask = maskOf<T>(label_map, label);
                const Geometry g = label_map.geometry();
                std::vector<uint8_t> filled(static_cast<size_t>(g.voxelCount()));
                if (mode == HoleFilling::k3D) {
                    auto fill = itk::BinaryFillholeImageFilter<Mask>::New();
                    fill->SetInput(mask);
                    fill->SetForegroundValue(1);
                    fill->SetFullyConnected(false);
                    fill->Update();
                    std::memcpy(filled.data(), fill->GetOutput()->GetBufferPointer(),
                                filled.size());
                } else {
                    using Slice = itk::Image<uint8_t, 2>;
                    const int64_t plane = g.size[0] * g.size[1];
                    for (int64_t k = 0; k < g.size[2]; ++k) {
                        auto slice = Slice::New();
                        Slice::RegionType region;
                        region.SetSize(0, g.size[0]);
                        region.SetSize(1, g.size[1]);
                        slice->SetRegions(region);
                        slice->Allocate();
                        std::memcpy(slice->GetBufferPointer(), mask->GetBufferPointer() + k * plane,
                                    static_cast<size_t>(plane));
                        auto fill = itk::BinaryFillholeImageFilter<Slice>::New();
                        fill->SetInput(slice);
                        fill->SetForegroundValue(1);
                        fill->SetFullyConnected(false);
                        fill->Update();
                        std::memcpy(filled.data() + k * plane,
                                    fill->GetOutput()->GetBufferPointer(),
                                    static_cast<size_t>(plane));
                    }
                }
                T* dst = label_map.data<T>();
                for (size_t i = 0; i < filled.size(); ++i)
                    if (filled[i] && dst[i] == 0) {
                        dst[i] = static_cast<T>(label);
                        ++report.voxels_filled;
                    }
            }
            return report;
        });
    } catch (const std::exception& e) {
        return internalError(std::string("hole filling failed: ") + e.what());
    }
}

Result<std::vector<PostprocessReport>> postprocess(Volume& label_map,
                                                   const std::vector<LabelPostprocess>& steps) {
    std::vector<PostprocessReport> reports;
    for (const LabelPostprocess& step : steps) {
        PostprocessReport total;
        total.label = step.label;
        if (step.options.min_component_ml > 0) {
            VOXSEG_ASSIGN_OR_RETURN(
                auto r, removeSmallComponents(label_map, step.label, step.options.min_component_ml,
                                              step.options.fully_connected));
            total.components_before = r.components_before;
            total.voxels_removed += r.voxels_removed;
        }
        if (step.options.largest_component) {
            VOXSEG_ASSIGN_OR_RETURN(
                auto r, keepLargestComponent(label_map, step.label, step.options.fully_connected));
            if (total.components_before == 0) total.components_before = r.components_before;
            total.voxels_removed += r.voxels_removed;
        }
        if (step.options.fill_holes != HoleFilling::kNone) {
            VOXSEG_ASSIGN_OR_RETURN(auto r,
                                    fillHoles(label_map, step.label, step.options.fill_holes));
            total.voxels_filled = r.voxels_filled;
        }
        reports.push_back(total);
    }
    return reports;
}

int64_t keepOnlyLabels(Volume& label_map, const std::vector<int>& keep) {
    int64_t cleared = 0;
    withPixelType(label_map.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        T* p = label_map.data<T>();
        for (int64_t i = 0, n = label_map.geometry().voxelCount(); i < n; ++i)
            if (p[i] != T(0) &&
                std::find(keep.begin(), keep.end(), static_cast<int>(p[i])) == keep.end()) {
                p[i] = T(0);
                ++cleared;
            }
    });
    return cleared;
}

}  // namespace voxseg::pipeline
