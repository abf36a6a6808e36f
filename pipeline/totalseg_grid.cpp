#include "pipeline/totalseg_grid.h"

#include "pipeline/normalization.h"
#include "pipeline/pixel_dispatch.h"
#include "pipeline/scipy_zoom.h"
#include "pipeline/tensor_layout.h"

#include <algorithm>
#include <cstring>
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

Result<Volume> totalSegmentatorZoomed(const Volume& region, const std::array<double, 3>& target_mm,
                                      int threads) {
    const Geometry& g = region.geometry();
    const std::array<double, 3> zoom = totalSegmentatorZoom(g, target_mm);
    if (zoom == std::array<double, 3>{1.0, 1.0, 1.0}) return region.castTo(PixelType::kFloat32);
    const std::array<int64_t, 3> size = scipyZoomShape(g.size, zoom);
    for (int64_t n : size)
        if (n < 1)
            return invalidArgument(
                "totalsegmentator grid: the region is too small to resample to the stage's "
                "spacing (fewer than one voxel on an axis)");
    ZoomOptions options;
    options.zoom = zoom;
    options.threads = threads;
    return zoomLinear(region, size, ZoomValues::kInt32, options);
}

Result<ZoomedInput> nnUNetInput(const Volume& zoomed, const engine::Normalization& normalization,
                                engine::AxisOrder order) {
    ZoomedInput in;
    in.zoomed = zoomed.geometry();
    VOXSEG_ASSIGN_OR_RETURN(in.nonzero, nonzeroBox({zoomed}));
    Volume net = zoomed;
    if (!in.nonzero.covers(in.zoomed)) {
        VOXSEG_ASSIGN_OR_RETURN(net, crop(zoomed, in.nonzero));
    }
    in.network = net.geometry();
    VOXSEG_ASSIGN_OR_RETURN(Volume norm, normalize(net, normalization));
    net = Volume();
    VOXSEG_ASSIGN_OR_RETURN(in.tensor, volumesToTensor({norm}, order));
    return in;
}

std::vector<Slab> totalSegmentatorSlabs(const std::array<int64_t, 3>& zoomed_size, bool split,
                                        const SlabRule& rule) {
    const int64_t n = zoomed_size[2];
    const int64_t voxels = zoomed_size[0] * zoomed_size[1] * n;
    if (!split || voxels <= rule.max_voxels || n <= rule.min_slices) return {Slab{0, n, 0, n}};
    const int64_t third = n / 3, m = rule.margin;
    return {Slab{0, third + m, 0, third}, Slab{third + 1 - m, 2 * third + m, third, 2 * third},
            Slab{2 * third + 1 - m, n, 2 * third, n}};
}

Result<Volume> totalSegmentatorLabels(const Volume& region, const std::array<double, 3>& target_mm,
                                      const engine::Normalization& normalization,
                                      engine::AxisOrder order, bool split, int threads,
                                      const PredictLabels& predict, TotalSegmentatorTrace* trace,
                                      const SlabRule& rule) {
    VOXSEG_ASSIGN_OR_RETURN(Volume zoomed, totalSegmentatorZoomed(region, target_mm, threads));
    const Geometry zg = zoomed.geometry();
    const std::vector<Slab> slabs = totalSegmentatorSlabs(zg.size, split, rule);
    if (trace) {
        trace->zoomed = zg.size;
        trace->slabs = slabs.size();
    }
    Volume labels;  // on the zoomed grid
    for (const Slab& slab : slabs) {
        CropBox box;
        box.begin = {0, 0, slab.begin};
        box.size = {zg.size[0], zg.size[1], slab.end - slab.begin};
        Volume part = zoomed;
        if (!box.covers(zg)) {
            VOXSEG_ASSIGN_OR_RETURN(part, crop(zoomed, box));
        }
        VOXSEG_ASSIGN_OR_RETURN(ZoomedInput in, nnUNetInput(part, normalization, order));
        part = Volume();
        VOXSEG_ASSIGN_OR_RETURN(Volume net, predict(in));
        Volume on_slab = net;
        if (!in.nonzero.covers(in.zoomed)) {
            VOXSEG_ASSIGN_OR_RETURN(on_slab, paste(net, in.zoomed, in.nonzero, 0.0));
        }
        if (slabs.size() == 1) {
            labels = on_slab;
            break;
        }
        if (labels.empty())
            labels = on_slab.pixelType() == PixelType::kUInt8 ? Volume::allocate<uint8_t>(zg)
                                                              : Volume::allocate<uint16_t>(zg);
        if (on_slab.pixelType() != labels.pixelType()) on_slab = on_slab.castTo(labels.pixelType());
        const int64_t plane = zg.size[0] * zg.size[1];
        withPixelType(labels.pixelType(), [&](auto tag) {
            using T = decltype(tag);
            std::memcpy(labels.data<T>() + slab.keep_begin * plane,
                        on_slab.data<T>() + (slab.keep_begin - slab.begin) * plane,
                        sizeof(T) * static_cast<size_t>((slab.keep_end - slab.keep_begin) * plane));
        });
    }
    Volume::applyGeometry(zg, *labels.base());
    if (trace && trace->postprocess) VOXSEG_RETURN_IF_ERROR(trace->postprocess(labels));
    if (trace && trace->keep_grids) {
        trace->zoomed_image = zoomed;
        trace->zoomed_labels = labels;
    }
    ZoomedInput whole;  // the way back reads only the grids
    whole.zoomed = zg;
    whole.nonzero.size = zg.size;
    return totalSegmentatorLabelsBack(labels, whole, region.geometry());
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
    std::optional<CropBox> found = boxWhere(
        labels, [&](int64_t v) { return v > 0 && v <= top && wanted[static_cast<size_t>(v)]; });
    if (!found) return std::nullopt;
    std::array<int64_t, 3> lo = found->begin, hi{};
    for (size_t a = 0; a < 3; ++a) hi[a] = lo[a] + found->size[a] - 1;
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
