// An interactive (nnInteractive-style, promptable) model package loaded for a session: the
// package's model.json read by engine/model (files, sha256, optional signature policy), its
// "interactive" section as an InteractiveSpec (docs/interactive.md), and the network compiled for
// its one input shape [1, image_channels + interaction_channels, p0, p1, p2] on a backend of the
// registry (CPU fp32 by default; device and precision as voxseg's other commands take them; int8
// reads the package's "quantization" record, written by `voxseg model calibrate`).
// forward() runs it and takes the argmax over the classes (ties to the lower class, as torch's
// argmax). The model is used by one thread at a time (a CompiledGraph is).
#pragma once

#include "backends/registry.h"
#include "core/status.h"
#include "core/volume.h"
#include "edit/interactive/session_state.h"
#include "engine/activation_observer.h"
#include "engine/backend.h"
#include "engine/graph/graph.h"
#include "engine/model/model_package.h"
#include "engine/model/model_signature.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace voxseg::edit::interactive {

// Parses model.json's "interactive" section (JSON text). Every value is required (the exporter,
// tools/export_nninteractive.py, resolves 2.6.0's defaults); unknown keys are ignored. Errors
// name `subject` (the package), the key and what to do.
Result<InteractiveSpec> parseInteractiveSpec(const std::string& json_text,
                                             const std::string& subject);

struct InteractiveModelOptions {
    engine::DeviceSpec device = engine::DeviceSpec::cpu();
    engine::Precision precision = engine::Precision::kFloat32;  // kAuto: choosePrecision
    int num_threads = 0;                                        // CPU: 0 = all cores
    engine::ModelTrustPolicy trust;                             // signature checks
    // int8 calibration (interactive_calibration.h): the fp32 network's tensors observed, and
    // an int8 compile from a record that has no held-back validation yet.
    engine::ActivationObserver observer;
    bool int8_validation_run = false;
};

class InteractiveModel {
  public:
    // Reads, verifies and compiles the package in `folder`. A package without an "interactive"
    // section, a network whose input or output does not match the section, a device or
    // precision the backend lacks: errors naming the package and what to do.
    static Result<std::unique_ptr<InteractiveModel>> load(const std::filesystem::path& folder,
                                                          const InteractiveModelOptions& options);

    const engine::ModelPackage& package() const { return package_; }
    const InteractiveSpec& spec() const { return spec_; }
    // The network input's shape: [1, channels, p0, p1, p2].
    const engine::Shape& inputShape() const { return input_shape_; }
    // The network as imported for the input shape (what int8 calibration names tensors by).
    const engine::Graph& graph() const { return graph_; }
    // "cpu fp32 (<device>)": for logs and the viewer.
    const std::string& describe() const { return description_; }
    // The precision it was compiled in (options.precision resolved).
    engine::Precision precision() const { return precision_; }
    // The package's "name version" and its network's sha256 (model.json), as a journal's
    // prompt_session line names the model.
    std::string identity() const;
    std::string networkSha256() const;

    // What about `image` lies outside model.json's "intended_input" (spacing, extent,
    // modality; pipeline/input_checks.h), one finding each; empty when the package states none
    // or the image fits. A session still runs: `voxseg edit` and the viewer warn with these.
    std::vector<std::string> inputFindings(const Volume& image) const;

    // One network call: input of inputShape()'s size, argmax per voxel out. The returned
    // Forward refers to this model, which must outlive it.
    Forward forward();

  private:
    Status run(const std::vector<float>& input, std::vector<uint8_t>& argmax);

    engine::ModelPackage package_;
    InteractiveSpec spec_;
    engine::Shape input_shape_;
    engine::Graph graph_;
    std::unique_ptr<engine::Backend> backend_;
    std::unique_ptr<engine::CompiledGraph> compiled_;
    std::string description_;
    engine::Precision precision_ = engine::Precision::kFloat32;
    std::vector<engine::Tensor> outputs_;
};

// Argmax over the class axis of logits [classes, n] (class-major): the lowest class among equal
// maxima, as torch.argmax. Exposed for tests.
void argmaxClasses(const float* logits, int classes, int64_t n, uint8_t* out);

}  // namespace voxseg::edit::interactive
