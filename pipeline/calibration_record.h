// What int8 calibration observes while the fp32 network runs, and the package record built from
// it (docs/int8-calibration.md): one histogram per tensor the int8 convolutions read, per-channel
// magnitudes of the 8-bit normalisation inputs, and the patches seen. `voxseg model calibrate`
// fills it through segment's sliding window (calibrate.h) and, for promptable packages, through
// simulated click sessions (edit/interactive/interactive_calibration.h). The observer's callback
// may run on several threads; the rest is for one thread.
#pragma once

#include "core/status.h"
#include "engine/activation_observer.h"
#include "engine/model/model_quantization.h"
#include "pipeline/calibrate.h"
#include "pipeline/calibration_ranges.h"
#include "pipeline/stage_quantization.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace voxseg::pipeline {

class ActivationObservations {
  public:
    ActivationObservations() = default;
    ActivationObservations(const ActivationObservations&) = delete;
    ActivationObservations& operator=(const ActivationObservations&) = delete;

    // An observer of `tensors` (histograms) and of `norm_inputs` (per-channel magnitudes around
    // their dropped bias) that adds into this object, which must outlive it.
    engine::ActivationObserver observer(
        const std::vector<std::string>& tensors,
        const std::vector<engine::quant::Int8NormInput>& norm_inputs);
    // Network runs (patches) observed.
    int64_t patches() const { return patches_; }

    // The record: every candidate tensor's range by `o.method` (an unobserved one is an error),
    // the norm inputs' channel scales, `case_ids` as the calibration cases.
    Result<engine::QuantizationRecord> record(const Int8Candidates& candidates,
                                              const std::vector<std::string>& case_ids,
                                              const CalibrateOptions& o) const;

  private:
    std::mutex mutex_;
    std::map<std::string, ActivationHistogram> histograms_;
    std::map<std::string, ChannelMagnitudes> magnitudes_;
    int64_t patches_ = 0;
};

}  // namespace voxseg::pipeline
