#include "pipeline/totalseg_grid.h"

#include "pipeline/normalization.h"
#include "pipeline/pixel_dispatch.h"
#include "pipeline/scipy_zoom.h"
#include "pipeline/tensor_layout.h"

#include <algorithm>
#include <limits>

namespace voxseg::pipeline {
namespace {

// A spacing as nibabel's float32 header zooms hold it. The volatile is needed: GCC 12.2 at -O3
// vectorises a loop of static_cast<double>(static_cast<float>(x)) and drops the rounding for
// the vectorised lanes (seen here: 0.7 stayed 0.7 on axes 0 and 1, became 0.69999999 on axis 2).
double asFloat32(double v) {
    volatile float f = static_cast<float>(v);
    return static_cast<double>(f);
}

}  // namespace

std::array<double, 3> totalSegmentatorZoom(const Geometry& grid,
                                           const std::array<double, 3>& target_mm) {
    std::array<double, 3> zoom{};
    for (int a = 0; a < 3; ++a) {
        // nibabel's get_zooms() is float32; numpy divides it by the float64 target in float64.
        const double spacing = asFloat32(grid.spacing[a]);
        zoom[static_cast<size_t>(a)] = spacing / target_mm[static_cast<size_t>(a)];
    }
    return zoom;
}

Result<ZoomedInput> totalSegmentatorInput(const Volume& region,
                                          const std::array<double, 3>& target_mm,
                                          const engine::Normalization& normalization,
                                          engine::AxisOrder order, int threads) {
    const Geometry& g = region.geometry();
    const std::array<double, 3> zoom = totalSegmentatorZoom(g, target_mm);
    ZoomedInput in;
    Volume zoomed;
    if (zoom == std::array<double, 3>{1.0, 1.0, 1.0}) {
        zoomed = region.castTo(PixelType::kFloat32);  // change_spacing returns it as it is
    } else {
        const std::array<int64_t, 3> size = scipyZoomShape(g.size, zoom);
        for (int64_t n : size)
            if (n < 1)
                return invalidArgument(
                    "totalsegmentator grid: the region is too small to resample to the "
                    "stage's spacing (fewer than one voxel on an axis)");
        ZoomOptions options;
        options.zoom = zoom;
        options.threads = threads;
        VOXSEG_ASSIGN_OR_RETURN(zoomed, zoomLinear(region, size, ZoomValues::kInt32, options));
    }
    in.zoomed = zoomed.geometry();
    VOXSEG_ASSIGN_OR_RETURN(in.nonzero, nonzeroBox({zoomed}));
    if (!in.nonzero.covers(in.zoomed)) {
        VOXSEG_ASSIGN_OR_RETURN(zoomed, crop(zoomed, in.nonzero));
    }
    in.network = zoomed.geometry();
    VOXSEG_ASSIGN_OR_RETURN(Volume norm, normalize(zoomed, normalization));
    zoomed = Volume();
    VOXSEG_ASSIGN_OR_RETURN(in.tensor, volumesToTensor({norm}, order));
    return in;
}

Result<Volume> totalSegmentatorLabelsBack(const Volume& network_labels, const ZoomedInput& in,
                                          const Geometry& region_grid) {
    Volume on_zoomed;
    if (in.nonzero.covers(in.zoomed)) {
        on_zoomed = network_labels;
    } else {
        VOXSEG_ASSIGN_OR_RETURN(on_zoomed, paste(network_labels, in.zoomed, in.nonzero, 0.0));
    }
    Volume back;
    if (in.zoomed.size == region_grid.size) {
        back = on_zoomed;
    } else {
        VOXSEG_ASSIGN_OR_RETURN(back, zoomNearest(on_zoomed, region_grid.size));
    }
    Volume::applyGeometry(region_grid, *back.base());
    return back;
}

std::optional<CropBox> roiSubsetBox(const Volume& labels, const std::vector<int>& requested,
                                    double margin_mm) {
    const Geometry& g = labels.geometry();
    const int top = *std::max_element(requested.begin(), requested.end());
    std::vector<char> wanted(static_cast<size_t>(std::max(top, 0)) + 1, 0);
    for (int v : requested)
        if (v >= 0) wanted[static_cast<size_t>(v)] = 1;
    std::array<int64_t, 3> lo{g.size}, hi{-1, -1, -1};
    withPixelType(labels.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        const T* p = labels.data<T>();
        int64_t idx = 0;
        for (int64_t k = 0; k < g.size[2]; ++k)
            for (int64_t j = 0; j < g.size[1]; ++j)
                for (int64_t i = 0; i < g.size[0]; ++i, ++idx) {
                    const auto v = static_cast<int64_t>(p[idx]);
                    if (v <= 0 || v > top || !wanted[static_cast<size_t>(v)]) continue;
                    const std::array<int64_t, 3> at{i, j, k};
                    for (size_t a = 0; a < 3; ++a) {
                        lo[a] = std::min(lo[a], at[a]);
                        hi[a] = std::max(hi[a], at[a]);
                    }
                }
    });
    if (hi[0] < 0) return std::nullopt;
    CropBox box;
    for (size_t a = 0; a < 3; ++a) {
        // (np.array(addon) / zooms).astype(int): float32 zooms, truncation.
        const double spacing = asFloat32(g.spacing[a]);
        const auto addon = static_cast<int64_t>(margin_mm / spacing);
        const int64_t b = std::max<int64_t>(0, lo[a] - addon);
        const int64_t e = std::min<int64_t>(g.size[a], hi[a] + 1 + addon);
        box.begin[a] = b;
        box.size[a] = e - b;
    }
    return box;
}

}  // namespace voxseg::pipeline
