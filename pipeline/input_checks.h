// Model-card checks of a segment run (docs/model-package.md, "Intended input"): before the run,
// the input's modality, extent and spacing against model.json's "intended_input"; after it, each
// label's volume against its "plausible_volume_ml". A model made for 40 mm crops run on a whole
// head, or a "hippocampus" of 115 mL, is named with what is off and by how much. Segmenter
// (pipeline/segment.cpp) logs the findings, keeps them in run.json and statistics.json
// ("warnings", per label "implausible") and, with --strict-input, refuses the input instead of
// running it. Plain functions, Qt-free; thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "engine/model/model_package.h"
#include "pipeline/statistics.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

// What an input has that intended_input speaks about.
struct InputDescription {
    Geometry geometry;
    std::string modality;  // "" when unknown (not checked)
};

// One finding per thing that is off ("input extent 256x256x176 mm, but ..."), without advice;
// empty when the model states no intended_input or the input fits it. `check_modality` false
// skips the modality (--ignore-modality: the user already chose to run another modality).
std::vector<std::string> checkIntendedInput(const engine::ModelPackage& model,
                                            const InputDescription& input, bool check_modality);

// A finding as a warning of a run that goes ahead (says that --strict-input would refuse it).
std::string inputWarning(const std::string& finding);

// --strict-input: the refusal (kFailedPrecondition, exit code 5 in the CLI) naming every finding
// and how to run anyway. `subject`: the input path.
Status strictInputRefusal(const engine::ModelPackage& model,
                          const std::vector<std::string>& findings, const std::string& subject);

// After the run: sets plausible_volume_ml and implausible on each label of `stats` the model
// gives a range for, and returns one warning per implausible label.
std::vector<std::string> flagImplausibleVolumes(const engine::ModelPackage& model,
                                                StatisticsReport& stats);

}  // namespace voxseg::pipeline
