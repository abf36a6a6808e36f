// INT8 names in staged packages (stage_quantization.h).
#include "pipeline/stage_quantization.h"

#include "engine/quant/int8_policy.h"
#include "engine/quant/quantization_record.h"

#include <optional>

namespace voxseg::pipeline {
namespace {

// `key` without "<stage>/", or nullopt when it is not the stage's.
std::optional<std::string> strip(const std::string& key, const std::string& stage) {
    const std::string prefix = stage + "/";
    if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0)
        return std::nullopt;
    return key.substr(prefix.size());
}

}  // namespace

std::string stageQuantizationKey(const std::string& stage, const std::string& name) {
    return stage + "/" + name;
}

Result<Int8Candidates> int8Candidates(const engine::LoadedModel& loaded,
                                      engine::quant::Int8FloatEnds ends, bool upsampling) {
    const engine::ModelPackage& m = loaded.package;
    if (!m.hasStages() && loaded.graphs.size() != 1)
        return unsupported("model " + m.name + " is an ensemble of " +
                           std::to_string(loaded.graphs.size()) +
                           " networks: int8 calibration takes one network, or one per stage "
                           "(docs/int8.md)");
    Int8Candidates out;
    for (size_t s = 0; s < loaded.graphs.size(); ++s) {
        const engine::Graph& g = loaded.graphs[s];
        const std::vector<std::string> floats = engine::quant::int8FloatLayers(g, ends);
        auto name = [&](const std::string& n) {
            return m.hasStages() ? stageQuantizationKey(m.stages.at(s).name, n) : n;
        };
        for (const std::string& f : floats) out.float_layers.push_back(name(f));
        const std::set<std::string> leaky = engine::quant::int8LeakyReluOutputs(g);
        for (const std::string& t : engine::quant::int8CandidateTensors(g, floats, upsampling)) {
            out.tensors.push_back(name(t));
            if (leaky.count(t)) out.leaky_relu_outputs.insert(name(t));
        }
        for (engine::quant::Int8NormInput in : engine::quant::int8NormInputs(g, floats)) {
            in.tensor = name(in.tensor);
            out.norm_inputs.push_back(std::move(in));
        }
    }
    return out;
}

Status checkStageQuantizationKeys(const engine::ModelPackage& package) {
    if (!package.hasStages() || !package.quantization) return Status::ok();
    auto check = [&](const std::string& key, const char* what) {
        for (const auto& st : package.stages)
            if (strip(key, st.name)) return Status::ok();
        return invalidArgument("model " + package.name + ": model.json \"quantization\"." + what +
                               " '" + key +
                               "' names no stage: a staged package's int8 names are "
                               "'<stage>/<tensor>' (docs/int8.md); recalibrate the package");
    };
    for (const auto& [key, q] : package.quantization->activations)
        VOXSEG_RETURN_IF_ERROR(check(key, "activations"));
    for (const std::string& key : package.quantization->float_layers)
        VOXSEG_RETURN_IF_ERROR(check(key, "float_layers"));
    for (const auto& [key, scales] : package.quantization->norm_inputs)
        VOXSEG_RETURN_IF_ERROR(check(key, "norm_inputs"));
    return Status::ok();
}

engine::CompileOptions stageCompileOptions(const engine::CompileOptions& compile,
                                           const std::string& stage) {
    engine::CompileOptions out = compile;
    out.observer = {};
    for (const std::string& t : compile.observer.tensors)
        if (auto local = strip(t, stage)) out.observer.tensors.push_back(*local);
    if (!out.observer.tensors.empty() && compile.observer.callback)
        out.observer.callback = [inner = compile.observer.callback, stage](
                                    const std::string& name, const float* data,
                                    const engine::Shape& shape) {
            inner(stageQuantizationKey(stage, name), data, shape);
        };
    if (compile.quantization) {
        auto record = std::make_shared<engine::QuantizationRecord>(*compile.quantization);
        record->activations.clear();
        record->float_layers.clear();
        record->norm_inputs.clear();
        for (const auto& [key, q] : compile.quantization->activations)
            if (auto local = strip(key, stage)) record->activations[*local] = q;
        for (const std::string& key : compile.quantization->float_layers)
            if (auto local = strip(key, stage)) record->float_layers.push_back(*local);
        for (const auto& [key, scales] : compile.quantization->norm_inputs)
            if (auto local = strip(key, stage)) record->norm_inputs[*local] = scales;
        out.quantization = std::move(record);
    }
    return out;
}

}  // namespace voxseg::pipeline
