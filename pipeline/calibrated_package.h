// The package `voxseg model calibrate` writes (issue 40): a copy of the input package whose
// model.json carries the "quantization" record (engine/model/model_quantization.h), staged in a
// hidden folder beside the output and renamed into place only when complete, so a failure, a
// refused gate or a cancel leaves nothing under the output's name. The input package is only read.
//
// Hashes and signatures: the ONNX files are copied unchanged, so model.json's sha256 values stay
// true (checked again on the staged copy). The record lives in model.json, which a package's
// signature.json covers, so an input signature cannot carry over: it is left out, and the copy is
// signed again (engine::signModelPackage) when a secret key is given; otherwise it is unsigned and
// says so (`voxseg model sign` signs it later). Not thread-safe; one draft per output.
#pragma once

#include "core/status.h"
#include "engine/model/model_quantization.h"

#include <filesystem>
#include <optional>
#include <string>

namespace voxseg::pipeline {

class CalibratedPackageDraft {
  public:
    // Checks `output` (must not exist, must not be `input`, its parent must exist) and copies
    // every file of `input` but signature.json into "<parent>/.<name>.calibrate-<random>".
    static Result<CalibratedPackageDraft> create(const std::filesystem::path& input,
                                                 const std::filesystem::path& output);
    ~CalibratedPackageDraft();  // removes the staged folder unless committed
    CalibratedPackageDraft(CalibratedPackageDraft&&) noexcept;
    CalibratedPackageDraft& operator=(CalibratedPackageDraft&&) = delete;

    const std::filesystem::path& folder() const { return staged_; }
    bool inputWasSigned() const { return input_signed_; }

    // Writes `record` into the staged model.json (every other key kept as it was, in its order)
    // and checks that the staged package reads back with it and its files match their sha256.
    Status setQuantization(const engine::QuantizationRecord& record);

    // Signs the staged package with `secret_key` when given, then renames it to the output.
    // Returns one line for the user about the signature ("signed by key …", "not signed: …").
    Result<std::string> commit(const std::optional<std::filesystem::path>& secret_key);

  private:
    CalibratedPackageDraft() = default;
    std::filesystem::path staged_, output_;
    bool input_signed_ = false;
    bool committed_ = false;
};

}  // namespace voxseg::pipeline
