// A model package's labels (core/label_info.h) chosen by name and as DICOM SEG segments (with
// description and algorithm name): what `voxseg segment` and the viewer write for a model. Plain
// functions on values; thread-safe.
#pragma once

#include "core/status.h"
#include "engine/model/model_package.h"
#include "io/seg_types.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

// The values of the labels named `names` (`--labels`), in the package's order; an unknown name is
// an error listing the package's names.
Result<std::vector<int>> labelValuesByName(const engine::ModelPackage& model,
                                           const std::vector<std::string>& names);
// `model` describing only the labels `values` (and only the measurements whose labels are all
// among them), for the outputs of a `--labels` run.
engine::ModelPackage withOnlyLabels(const engine::ModelPackage& model,
                                    const std::vector<int>& values);
std::vector<io::SegmentDescription> modelSegmentDescriptions(const engine::ModelPackage& model);

}  // namespace voxseg::pipeline
