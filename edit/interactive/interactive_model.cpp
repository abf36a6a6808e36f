#include "edit/interactive/interactive_model.h"

#include "core/log.h"
#include "engine/onnx/import.h"
#include "pipeline/input_checks.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

namespace voxseg::edit::interactive {

namespace {

using nlohmann::json;

constexpr const char* kComponent = "interactive";
constexpr const char* kHelp = "re-export the package with tools/export_nninteractive.py";

// Reads the section's values, keeping the first error (messages: "interactive.<key>: ...").
class SpecReader {
  public:
    SpecReader(const json& root, std::string subject) : root_(root), subject_(std::move(subject)) {}

    const Status& status() const { return status_; }
    bool ok() const { return status_.isOk(); }

    void fail(const std::string& key, const std::string& what) {
        if (ok())
            status_ = invalidArgument(
                fmt::format("model.json interactive.{}: {} ({})", key, what, kHelp), subject_);
    }
    const json* get(const std::string& key) {
        auto it = root_.find(key);
        if (it == root_.end()) {
            fail(key, "missing (required)");
            return nullptr;
        }
        return &*it;
    }
    std::string string(const std::string& key) {
        const json* v = get(key);
        if (v && !v->is_string()) fail(key, "expected a string, got " + v->dump());
        return v && v->is_string() ? v->get<std::string>() : std::string();
    }
    double number(const std::string& key) {
        const json* v = get(key);
        if (v && !v->is_number()) fail(key, "expected a number, got " + v->dump());
        return v && v->is_number() ? v->get<double>() : 0.0;
    }
    int64_t integer(const json& v, const std::string& key, int64_t lo, int64_t hi) {
        if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
            fail(key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v.dump()));
            return lo;
        }
        return v.get<int64_t>();
    }
    int64_t integer(const std::string& key, int64_t lo, int64_t hi) {
        const json* v = get(key);
        return v ? integer(*v, key, lo, hi) : lo;
    }
    bool boolean(const json& v, const std::string& key) {
        if (!v.is_boolean()) fail(key, "expected true or false, got " + v.dump());
        return v.is_boolean() && v.get<bool>();
    }
    Index3 triple(const std::string& key, int64_t lo, int64_t hi) {
        Index3 out{};
        const json* v = get(key);
        if (v && (!v->is_array() || v->size() != 3)) fail(key, "expected 3 integers (z, y, x)");
        if (!ok() || !v) return out;
        for (size_t i = 0; i < 3; ++i)
            out[i] = integer((*v)[i], fmt::format("{}[{}]", key, i), lo, hi);
        return out;
    }

  private:
    const json& root_;
    std::string subject_;
    Status status_;
};

const std::set<std::string> kInteractionNames = {"points", "bbox2d", "bbox3d", "scribble", "lasso"};

void readChannelMapping(SpecReader& r, const json& mapping, InteractiveSpec& spec) {
    if (!mapping.is_object()) return r.fail("channel_mapping", "expected an object");
    const int n = spec.interaction_channels;
    for (const auto& [name, v] : mapping.items()) {
        const std::string key = "channel_mapping." + name;
        if (name == "prev_seg") {
            spec.prev_seg = static_cast<int>(r.integer(v, key, 0, n - 1));
            continue;
        }
        if (!kInteractionNames.count(name))
            return r.fail(key,
                          "unknown interaction (expected prev_seg, points, bbox2d, bbox3d, "
                          "scribble or lasso)");
        if (!v.is_array() || v.size() != 2)
            return r.fail(key, "expected [positive channel, negative channel], got " + v.dump());
        spec.channel_pairs[name] = {static_cast<int>(r.integer(v[0], key + "[0]", 0, n - 1)),
                                    static_cast<int>(r.integer(v[1], key + "[1]", 0, n - 1))};
    }
    if (!mapping.contains("prev_seg")) r.fail("channel_mapping.prev_seg", "missing (required)");
}

void readSupported(SpecReader& r, const json& supported, InteractiveSpec& spec) {
    if (!supported.is_object()) return r.fail("supported_interactions", "expected an object");
    for (const auto& [name, v] : supported.items()) {
        const std::string key = "supported_interactions." + name;
        if (!kInteractionNames.count(name))
            return r.fail(key,
                          "unknown interaction (expected points, bbox2d, bbox3d, scribble "
                          "or lasso)");
        spec.supported[name] = r.boolean(v, key);
        if (spec.supported[name] && !spec.channel_pairs.count(name))
            return r.fail(key, "is supported but channel_mapping has no channels for it");
    }
}

// The network imported for `input` (one import). When that fails, the declared shapes are
// imported to tell a channel-count mismatch (the usual cause) apart from other errors.
Result<engine::Graph> importNetwork(const std::filesystem::path& path, const std::string& model,
                                    const InteractiveSpec& spec, const engine::Shape& input) {
    engine::OnnxImportOptions import;
    import.input_shapes = {input};
    auto imported = engine::importOnnx(path, import);
    if (imported.isOk() && imported->inputs.size() != 1)
        return unsupported(fmt::format("model {}: {} has {} inputs; an interactive network takes "
                                       "one (image and prompt channels stacked)",
                                       model, spec.network, imported->inputs.size()),
                           path.string());
    if (imported.isOk()) return imported;
    auto declared = engine::importOnnx(path);
    if (declared.isOk()) {
        const engine::Shape& in = declared->values[declared->inputs[0]].shape;
        if (in.size() == 5 && in[1] != input[1])
            return invalidArgument(
                fmt::format("model {}: {} takes {} input channels, but model.json's interactive "
                            "section says image_channels {} + interaction_channels {} = {}; {}",
                            model, spec.network, in[1], spec.image_channels,
                            spec.interaction_channels, input[1], kHelp),
                path.string());
    }
    return imported.status().withContext(
        fmt::format("model {}: {} (for input {} from model.json's interactive section)", model,
                    spec.network, engine::shapeToString(input)));
}

}  // namespace

Result<InteractiveSpec> parseInteractiveSpec(const std::string& json_text,
                                             const std::string& subject) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {
        return corruptData(std::string("model.json interactive section: ") + e.what(), subject);
    }
    if (!root.is_object())
        return invalidArgument("model.json interactive: expected an object", subject);
    SpecReader r(root, subject);
    InteractiveSpec spec;
    spec.source = r.string("source");
    if (r.ok() && spec.source != "nninteractive")
        r.fail("source",
               "\"" + spec.source + "\" is not a session voxseg runs (\"nninteractive\")");
    spec.session_version = r.string("session_version");
    spec.network = r.string("network");
    spec.patch = r.triple("patch_size", 1, 1024);
    spec.image_channels = static_cast<int>(r.integer("image_channels", 1, 64));
    spec.interaction_channels = static_cast<int>(r.integer("interaction_channels", 1, 64));
    if (const json* v = r.get("channel_mapping"); v && r.ok()) readChannelMapping(r, *v, spec);
    if (const json* v = r.get("supported_interactions"); v && r.ok()) readSupported(r, *v, spec);
    if (const json* v = r.get("supports_initial_label"); v && r.ok())
        spec.supports_initial_label = r.boolean(*v, "supports_initial_label");
    const double radius = r.number("point_radius");
    if (r.ok() && (radius != std::floor(radius) || radius < 1 || radius > 64))
        r.fail("point_radius", fmt::format("{} is not supported: voxseg draws points of whole "
                                           "radii 1..64",
                                           radius));
    spec.point_radius = static_cast<int>(radius);
    spec.scribble_thickness = r.triple("scribble_thickness", 1, 1024);
    spec.interaction_decay = r.number("interaction_decay");
    if (r.ok() && !(spec.interaction_decay > 0.0 && spec.interaction_decay <= 1.0))
        r.fail("interaction_decay",
               fmt::format("must be in (0, 1], got {}", spec.interaction_decay));
    spec.pad_mode_image = r.string("pad_mode_image");
    if (r.ok() && spec.pad_mode_image != "constant")
        r.fail("pad_mode_image", "\"" + spec.pad_mode_image +
                                     "\" is not supported: nninteractive 2.6.0 predicts only "
                                     "with \"constant\"");
    if (const json* v = r.get("autozoom"); v && r.ok()) {
        if (!v->is_object() || !v->contains("max_factor") || !v->contains("growth") ||
            !(*v)["max_factor"].is_number() || !(*v)["growth"].is_number()) {
            r.fail("autozoom", "expected {\"max_factor\": number, \"growth\": number}");
        } else {
            spec.max_zoom = (*v)["max_factor"].get<double>();
            spec.zoom_growth = (*v)["growth"].get<double>();
            if (!(spec.max_zoom >= 1.0) || !(spec.zoom_growth > 1.0))
                r.fail("autozoom", "needs max_factor >= 1 and growth > 1");
        }
    }
    if (root.contains("refinement_margin") && r.ok()) {
        spec.refinement_margin = r.triple("refinement_margin", 0, 512);
        for (size_t a = 0; a < 3 && r.ok(); ++a)
            if (2 * spec.refinement_margin[a] >= spec.patch[a])
                r.fail("refinement_margin",
                       fmt::format("{} on axis {} leaves no inner part of the {} voxel patch "
                                   "(needs 2 x margin < patch)",
                                   spec.refinement_margin[a], a, spec.patch[a]));
    }
    const std::string normalization = r.string("normalization");
    if (r.ok() && normalization != "nonzero_zscore")
        r.fail("normalization",
               "\"" + normalization + "\" is not supported (expected \"nonzero_zscore\")");
    spec.num_classes = static_cast<int>(r.integer("num_classes", 2, 255));
    if (root.contains("licence") && root["licence"].is_string())
        spec.licence = root["licence"].get<std::string>();
    if (!r.ok()) return r.status();
    return spec;
}

void argmaxClasses(const float* logits, int classes, int64_t n, uint8_t* out) {
    for (int64_t i = 0; i < n; ++i) {
        float best = logits[i];
        int arg = 0;
        for (int c = 1; c < classes; ++c) {
            const float v = logits[c * n + i];
            // torch.argmax: the first maximum; a NaN counts as the maximum.
            if (v > best || (std::isnan(v) && !std::isnan(best))) {
                best = v;
                arg = c;
            }
        }
        out[i] = static_cast<uint8_t>(arg);
    }
}

Result<std::unique_ptr<InteractiveModel>> InteractiveModel::load(
    const std::filesystem::path& folder, const InteractiveModelOptions& options) {
    auto model = std::unique_ptr<InteractiveModel>(new InteractiveModel());
    VOXSEG_ASSIGN_OR_RETURN(model->package_, engine::readModelPackage(folder));
    const engine::ModelPackage& p = model->package_;
    const std::string subject = folder.string();
    if (!p.isInteractive())
        return invalidArgument("model " + p.name +
                                   " is not an interactive package (its model.json has no "
                                   "\"interactive\" section): use it with voxseg segment, or "
                                   "export an nnInteractive model with "
                                   "tools/export_nninteractive.py",
                               subject);
    VOXSEG_ASSIGN_OR_RETURN(model->spec_, parseInteractiveSpec(p.interactive_json, subject));
    InteractiveSpec& spec = model->spec_;
    spec.licence = spec.licence.empty() ? p.license : spec.licence;
    bool listed = false;
    for (const auto& f : p.models) listed = listed || f.file == spec.network;
    if (!listed)
        return invalidArgument("model.json interactive.network \"" + spec.network +
                                   "\" is not one of the package's files (\"models\"); " + kHelp,
                               subject);
    VOXSEG_RETURN_IF_ERROR(engine::verifyModelFiles(p));
    if (options.trust.active()) {
        VOXSEG_ASSIGN_OR_RETURN(std::string trust, engine::checkModelTrust(folder, options.trust));
        log::info(kComponent, "model {}: {}", p.name, trust);
    }

    const int channels = spec.image_channels + spec.interaction_channels;
    model->input_shape_ = {1, channels, spec.patch[0], spec.patch[1], spec.patch[2]};
    const auto path = folder / spec.network;
    VOXSEG_ASSIGN_OR_RETURN(engine::Graph graph,
                            importNetwork(path, p.name, spec, model->input_shape_));
    if (graph.outputs.empty()) return corruptData(spec.network + " has no outputs", path.string());
    engine::Shape expected = model->input_shape_;
    expected[1] = spec.num_classes;
    const engine::Shape& out = graph.values[graph.outputs[0]].shape;
    if (out != expected)
        return invalidArgument(
            fmt::format("model {}: {} produces {} for input {}, but the interactive section "
                        "expects {} (num_classes logits at the patch size); {}",
                        p.name, spec.network, engine::shapeToString(out),
                        engine::shapeToString(model->input_shape_), engine::shapeToString(expected),
                        kHelp),
            path.string());

    std::string fallback;
    VOXSEG_ASSIGN_OR_RETURN(model->backend_, engine::createBackend(options.device, &fallback));
    if (!fallback.empty()) log::warning(kComponent, "{}", fallback);
    std::string precision_warning;
    VOXSEG_ASSIGN_OR_RETURN(engine::PrecisionChoice precision,
                            engine::choosePrecision(*model->backend_, options.precision,
                                                    p.precisionHints(), &precision_warning));
    if (!precision_warning.empty()) log::warning(kComponent, "{}", precision_warning);
    engine::CompileOptions compile;
    compile.precision = precision.precision;
    compile.num_threads = options.num_threads;
    compile.device_index = options.device.index;
    compile.observer = options.observer;
    if (engine::usesCalibration(compile.precision)) {
        if (!options.int8_validation_run)
            VOXSEG_RETURN_IF_ERROR(engine::int8PackageSupport(p.quantization, p.name));
        if (!p.quantization)
            return unsupported("model " + p.name +
                                   " has no int8 calibration: calibrate it with voxseg model "
                                   "calibrate (docs/interactive.md)",
                               subject);
        compile.quantization = std::make_shared<const engine::QuantizationRecord>(*p.quantization);
    }
    auto compiled = model->backend_->compile(graph, {model->input_shape_}, compile);
    if (!compiled.isOk())
        return compiled.status().withContext("model " + p.name + ": compiling " + spec.network);
    model->compiled_ = std::move(compiled).value();
    model->graph_ = std::move(graph);
    model->precision_ = precision.precision;
    model->description_ = fmt::format("{} {} ({})", model->backend_->name(),
                                      engine::precisionName(precision.precision),
                                      model->backend_->deviceDescription());
    return model;
}

Status InteractiveModel::run(const std::vector<float>& input, std::vector<uint8_t>& argmax) {
    const int64_t n = engine::numel(input_shape_);
    if (static_cast<int64_t>(input.size()) != n)
        return internalError(
            fmt::format("interactive network input has {} values, expected {}", input.size(), n));
    std::vector<engine::Tensor> inputs{engine::Tensor::fromFloats(input_shape_, input)};
    VOXSEG_RETURN_IF_ERROR(compiled_->run(inputs, outputs_));
    const int64_t voxels = spec_.patch[0] * spec_.patch[1] * spec_.patch[2];
    argmax.resize(static_cast<size_t>(voxels));
    argmaxClasses(outputs_[0].data<float>(), spec_.num_classes, voxels, argmax.data());
    return Status::ok();
}

std::vector<std::string> InteractiveModel::inputFindings(const Volume& image) const {
    return pipeline::checkIntendedInput(
        package_, pipeline::InputDescription{image.geometry(), image.info().modality}, true);
}

std::string InteractiveModel::identity() const {
    return package_.version.empty() ? package_.name : package_.name + " " + package_.version;
}

std::string InteractiveModel::networkSha256() const {
    for (const engine::ModelFile& f : package_.models)
        if (f.file == spec_.network) return f.sha256;
    return {};
}

Forward InteractiveModel::forward() {
    return [this](const std::vector<float>& input, std::vector<uint8_t>& argmax) {
        return run(input, argmax);
    };
}

}  // namespace voxseg::edit::interactive
