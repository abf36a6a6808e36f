// preview.png: a quick-QA picture of a segmentation: axial, coronal and sagittal slices side by
// side through the centroid of the largest structure, greyscale image with the label overlay
// (model colours, 50 % opacity). Views are in radiological convention (patient right on the
// image left; superior at the top) whatever the volume's orientation: both volumes are reoriented
// to LPS first (exact permutation), then sampled to square pixels in millimetres. Window: CT
// abdomen (W 400, L 40) for CT, else the 0.5-99.5 percentiles. PNG through ITK's PNGImageIO,
// written atomically. Plain function; thread-safe.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "pipeline/labels.h"

#include <array>
#include <string>
#include <vector>

namespace voxseg::pipeline {

struct PreviewOptions {
    int panel_pixels = 320;  // longest side of each view
    double opacity = 0.5;
};

struct PreviewReport {
    int focus_label = 0;  // the largest structure (0: empty label map, volume centre)
    std::array<int64_t, 3> focus_index{0, 0, 0};  // in the input label map's (i, j, k)
    int width = 0;
    int height = 0;
};

Result<PreviewReport> writePreview(const Volume& image, const Volume& label_map,
                                   const std::vector<LabelInfo>& labels, const std::string& path,
                                   const PreviewOptions& options = {});

}  // namespace voxseg::pipeline
