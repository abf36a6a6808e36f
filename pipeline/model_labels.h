// A model package's labels as the pipeline stages use them (value, name, display colour) and as
// DICOM SEG segments (coded category and type, algorithm name): what `voxseg segment` and the
// viewer show and write for a model. Plain functions on values; thread-safe.
#pragma once

#include "engine/model_package.h"
#include "io/seg_types.h"
#include "pipeline/labels.h"

#include <vector>

namespace voxseg::pipeline {

std::vector<LabelInfo> modelLabelInfos(const engine::ModelPackage& model);
std::vector<io::SegmentDescription> modelSegmentDescriptions(const engine::ModelPackage& model);

}  // namespace voxseg::pipeline
