// Model-card checks of a segment run (docs/model-package.md, "Intended input"): before the run,
// the input channels' modalities against model.json's channels, and the input's modality, extent
// and spacing against model.json's "intended_input"; after it, each label's volume against its
// "plausible_volume_ml". A model made for 40 mm crops run on a whole head, or a "hippocampus" of
// 115 mL, is named with what is off and by how much. Segmenter (pipeline/segment.cpp) logs the
// findings, keeps them in run.json and statistics.json ("warnings", per label "implausible") and,
// with --strict-input, refuses the input instead of running it; the viewer's Run model dialog
// shows the same findings before the run (ui/run_model_dialog.h). Plain functions, Qt-free;
// thread-safe.
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

// An input channel whose modality differs from model.json's channels[i].modality (a hard
// refusal of segment unless the user chose to run anyway: --ignore-modality, the viewer's "Run
// anyway (ignore modality)" box).
struct ModalityMismatch {
    std::string channel;  // the model's channel name when it has several, else ""
    std::string have, want;
};

// `modalities`: the input's channels' modalities in the model's channel order ("" unknown: not
// compared); extra or missing channels are not this function's business.
std::vector<ModalityMismatch> modalityMismatches(const engine::ModelPackage& model,
                                                 const std::vector<std::string>& modalities);
// "input is MR but model hippocampus-demo expects CT", without advice.
std::string modalityMismatchReason(const engine::ModelPackage& model, const ModalityMismatch& m);
// The refusal (kInvalidArgument) of a run on `subject`: the reason, "choose another series or
// model", and `how_to_override`, the front end's own way to run anyway ("--ignore-modality" for
// the CLI; the viewer names its checkbox, not a flag its user never types).
Status modalityRefusal(const engine::ModelPackage& model, const ModalityMismatch& m,
                       const std::string& how_to_override, const std::string& subject);

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
