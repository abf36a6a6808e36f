// Post-processing of a label map, one label at a time, on ITK:
// - keep the largest connected component (itk::ConnectedComponentImageFilter +
//   itk::RelabelComponentImageFilter; 26-connectivity by default, like nnU-Net's skimage.label);
// - remove components smaller than a volume in mL (same filters, minimum object size in voxels
//   from the voxel volume);
// - fill holes (itk::BinaryFillholeImageFilter; in 3D, or slice by slice along the k axis for
//   structures that are open at the ends of a stack). Only background voxels are filled, so a
//   structure enclosed by another keeps its label.
// Removed voxels become background (0). Label maps are uint8 or uint16; edited in place.
// Plain functions; thread-safe on distinct volumes.
#pragma once

#include "core/status.h"
#include "core/volume.h"

#include <vector>

namespace voxseg::pipeline {

enum class HoleFilling { kNone, k3D, kPerSlice };

struct PostprocessOptions {
    bool largest_component = false;
    double min_component_ml = 0.0;  // 0: keep all
    HoleFilling fill_holes = HoleFilling::kNone;
    bool fully_connected = true;  // 26-connectivity (false: 6, faces only)
};

struct LabelPostprocess {
    int label = 0;
    PostprocessOptions options;
};

// Statistics of what a step changed, for run.json and logs.
struct PostprocessReport {
    int label = 0;
    int components_before = 0;
    int64_t voxels_removed = 0;
    int64_t voxels_filled = 0;
};

Result<PostprocessReport> keepLargestComponent(Volume& label_map, int label,
                                               bool fully_connected = true);
Result<PostprocessReport> removeSmallComponents(Volume& label_map, int label, double min_ml,
                                                bool fully_connected = true);
Result<PostprocessReport> fillHoles(Volume& label_map, int label, HoleFilling mode);

// Sets every voxel whose label is not in `keep` to 0 (`--labels`); returns the voxels cleared.
int64_t keepOnlyLabels(Volume& label_map, const std::vector<int>& keep);

// Applies each entry's steps in the order: small components, largest component, holes.
Result<std::vector<PostprocessReport>> postprocess(Volume& label_map,
                                                   const std::vector<LabelPostprocess>& steps);

}  // namespace voxseg::pipeline
