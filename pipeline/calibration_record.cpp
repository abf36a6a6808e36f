#include "pipeline/calibration_record.h"

namespace voxseg::pipeline {

engine::ActivationObserver ActivationObservations::observer(
    const std::vector<std::string>& tensors,
    const std::vector<engine::quant::Int8NormInput>& norm_inputs) {
    engine::ActivationObserver o;
    o.tensors = tensors;
    std::map<std::string, std::vector<float>> centres;
    for (const auto& in : norm_inputs) {
        o.tensors.push_back(in.tensor);
        centres[in.tensor] = in.dropped_bias;
    }
    const std::string first = tensors.empty() ? std::string() : tensors.front();
    o.callback = [this, centres, first](const std::string& name, const float* data,
                                        const engine::Shape& shape) {
        const std::lock_guard lock(mutex_);
        if (const auto c = centres.find(name); c != centres.end())
            magnitudes_[name].add(data, shape, c->second);
        else
            histograms_[name].add(data, static_cast<size_t>(engine::numel(shape)));
        if (name == first) patches_ += shape[0];  // once per network run, per patch
    };
    return o;
}

Result<engine::QuantizationRecord> ActivationObservations::record(
    const Int8Candidates& candidates, const std::vector<std::string>& case_ids,
    const CalibrateOptions& o) const {
    engine::QuantizationRecord q;
    q.weight_bits = o.weight_bits;
    q.method = o.method;
    q.percentile = o.percentile;
    q.zero_points = o.zero_points;
    q.int8_upsampling = o.int8_upsampling;
    q.float_layers = candidates.float_layers;
    q.calibration_cases = case_ids;
    for (const std::string& t : candidates.tensors) {
        const auto it = histograms_.find(t);
        if (it == histograms_.end())
            return internalError("int8 calibration: tensor '" + t +
                                 "' was asked for but never observed");
        VOXSEG_ASSIGN_OR_RETURN(q.activations[t],
                                calibrateActivation(it->second, o.method, o.percentile, t,
                                                    candidates.leaky_relu_outputs.count(t)
                                                        ? o.zero_points
                                                        : engine::quant::ZeroPoints::kAlways));
    }
    for (const auto& [t, m] : magnitudes_) {
        VOXSEG_ASSIGN_OR_RETURN(q.norm_inputs[t],
                                calibrateChannelScales(m, o.method, o.percentile, t));
    }
    return q;
}

}  // namespace voxseg::pipeline
