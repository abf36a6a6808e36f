#include "engine/model/model_package.h"

#include "core/file_io.h"
#include "core/limits.h"
#include "core/sha256.h"
#include "engine/model/model_json.h"
#include "engine/onnx/import.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace voxseg::engine {

using namespace detail;  // engine/model/model_json.h: the model.json reader and value helpers

const char* normalizationSchemeName(Normalization::Scheme scheme) {
    switch (scheme) {
        case Normalization::Scheme::kCT:
            return "ct";
        case Normalization::Scheme::kZScore:
            return "zscore";
        case Normalization::Scheme::kNone:
            return "none";
        case Normalization::Scheme::kPercentile:
            return "percentile";
        case Normalization::Scheme::kWindow:
            return "window";
    }
    return "?";
}

const char* interpolationName(Interpolation interpolation) {
    switch (interpolation) {
        case Interpolation::kNearestExact:
            return "nearest-exact";
        case Interpolation::kLinear:
            return "linear";
        case Interpolation::kSpline3:
            return "spline3";
    }
    return "?";
}

int64_t StageSpec::outputChannels() const {
    const auto n = static_cast<int64_t>(output.labels.size());
    switch (output.kind) {
        case StageOutputKind::kSoftmax:
            return n + 1;
        case StageOutputKind::kSigmoid:
        case StageOutputKind::kRegions:
            return n;
        case StageOutputKind::kProbability:
            return output.channels;
    }
    return n;
}

std::vector<int> StageSpec::channelLabelValues() const {
    std::vector<int> values;
    if (output.kind == StageOutputKind::kSoftmax) values.push_back(0);
    values.insert(values.end(), output.labels.begin(), output.labels.end());
    return values;
}

SlidingWindowOptions StageSpec::slidingWindowOptions() const {
    SlidingWindowOptions o;
    o.patch_size = patch();
    o.overlap = inference.overlap;
    o.gaussian = inference.gaussian;
    o.sigma_scale = inference.gaussian_sigma_scale;
    o.mirror_axes = inference.mirror_axes;
    o.convention = inference.convention;
    o.accumulation = inference.accumulation;
    return o;
}

int64_t ModelPackage::outputChannels() const {
    const auto n = static_cast<int64_t>(labels.size());
    return output == OutputKind::kSoftmax ? n + 1 : n;
}

std::vector<int> ModelPackage::channelLabelValues() const {
    std::vector<int> values;
    if (output == OutputKind::kSoftmax) values.push_back(0);
    for (const auto& l : labels) values.push_back(l.value);
    return values;
}

SlidingWindowOptions ModelPackage::slidingWindowOptions() const {
    SlidingWindowOptions o;
    o.patch_size = patch_size;
    o.overlap = inference.overlap;
    o.gaussian = inference.gaussian;
    o.sigma_scale = inference.gaussian_sigma_scale;
    o.mirror_axes = inference.mirror_axes;
    o.convention = inference.convention;
    o.accumulation = inference.accumulation;
    return o;
}

namespace {

// The top-level keys each format version allows (and those it must not have).
void checkTopLevelKeys(Reader& r, const json& root, bool v2) {
    if (v2) {
        for (const char* k :
             {"spacing_mm", "patch_size", "output", "inference", "sha256", "models"})
            if (root.contains(k))
                r.fail(k,
                       "not a top-level key in format_version 2: each entry of \"stages\" has "
                       "its own (see docs/model-package-stages.md, \"Stages\")");
        r.onlyKeys(root, "",
                   {"format_version", "name", "version", "description", "license", "attribution",
                    "disclaimer", "citation", "channels", "axis_order", "orientation", "labels",
                    "stages", "measurements", "precision", "intended_input", "quantization"});
    } else {
        for (const char* k : {"stages", "measurements", "citation"})
            if (root.contains(k))
                r.fail(k, "needs \"format_version\": 2 (this model.json is version 1)");
        r.onlyKeys(root, "", {"format_version", "name",        "version",        "description",
                              "license",        "attribution", "disclaimer",     "channels",
                              "spacing_mm",     "patch_size",  "axis_order",     "orientation",
                              "labels",         "output",      "inference",      "sha256",
                              "models",         "precision",   "intended_input", "quantization"});
    }
}

// name, version, description (optional for interactive packages), license, attribution,
// disclaimer, citation, precision.
void readIdentity(Reader& r, const json& root, ModelPackage& p, bool description_required = true) {
    if (const json* v = r.member(root, "", "name", true)) p.name = r.string(*v, "name");
    if (const json* v = r.member(root, "", "version", true)) p.version = r.string(*v, "version");
    if (const json* v = r.member(root, "", "description", description_required))
        p.description = r.string(*v, "description", true);
    if (const json* v = r.member(root, "", "license", true)) p.license = r.string(*v, "license");
    if (const json* v = r.member(root, "", "attribution", false))
        p.attribution = r.string(*v, "attribution", true);
    if (const json* v = r.member(root, "", "disclaimer", false))
        p.disclaimer = r.string(*v, "disclaimer", true);
    if (const json* v = r.member(root, "", "citation", false))
        p.citation = r.string(*v, "citation", true);
    if (const json* v = r.member(root, "", "precision", false))
        readPrecision(r, *v, "precision", p.precision);
    if (const json* v = r.member(root, "", "quantization", false))
        readQuantization(r, *v, "quantization", p.quantization.emplace());
}

// channels: {modality, name, match} (+ normalization in version 1).
void readChannels(Reader& r, const json& root, bool v2, ModelPackage& p) {
    if (const json* v = r.member(root, "", "channels", true);
        v && r.array(*v, "channels", "{modality, normalization} objects")) {
        if (v->empty()) r.fail("channels", "must list at least one input channel");
        for (size_t i = 0; i < v->size() && r.ok(); ++i) {
            const std::string key = Reader::index("channels", i);
            const json& c = (*v)[i];
            if (!r.object(c, key)) break;
            if (v2)  // version 2: each stage normalises its own input
                r.onlyKeys(c, key, {"modality", "name", "match"});
            else
                r.onlyKeys(c, key, {"modality", "normalization", "name", "match"});
            ChannelSpec ch;
            if (const json* m = r.member(c, key, "modality", true))
                ch.modality = r.string(*m, Reader::join(key, "modality"));
            readChannelName(r, c, key, *v, i, ch);
            if (!v2)
                if (const json* n = r.member(c, key, "normalization", true))
                    readNormalization(r, *n, Reader::join(key, "normalization"), ch.normalization,
                                      false);
            for (const ChannelSpec& other : p.channels)
                if (r.ok() && other.name == ch.name)
                    r.fail(Reader::join(key, "name"),
                           "channel name \"" + ch.name + "\" is used twice");
            p.channels.push_back(ch);
        }
        if (r.ok() && v2 && p.channels.size() > 1)
            r.fail("channels",
                   "format_version 2 packages take one image channel for now (stages normalise "
                   "one channel); use format_version 1 for a multi-channel network");
    }
}

// patch_size and spacing_mm (version 1: version 2 has them per stage), axis_order, orientation.
void readGeometry(Reader& r, const json& root, bool v2, ModelPackage& p) {
    if (const json* v = v2 ? nullptr : r.member(root, "", "patch_size", true);
        v && r.array(*v, "patch_size", "positive integers")) {
        for (size_t i = 0; i < v->size() && r.ok(); ++i)
            p.patch_size.push_back(r.integer((*v)[i], Reader::index("patch_size", i), 1, 4096));
        if (r.ok() && (p.patch_size.size() < 2 || p.patch_size.size() > 3))
            r.fail("patch_size", "expected 2 or 3 entries (2D or 3D network), got " +
                                     std::to_string(p.patch_size.size()));
    }
    if (const json* v = v2 ? nullptr : r.member(root, "", "spacing_mm", true);
        v && r.array(*v, "spacing_mm", "positive numbers")) {
        for (size_t i = 0; i < v->size() && r.ok(); ++i) {
            const double s = r.number((*v)[i], Reader::index("spacing_mm", i));
            if (r.ok() && !(s > 0.0))
                r.fail(Reader::index("spacing_mm", i), "must be > 0, got " + shortDump((*v)[i]));
            p.spacing_mm.push_back(s);
        }
        if (r.ok() && p.spacing_mm.size() != p.patch_size.size())
            r.fail("spacing_mm", "has " + std::to_string(p.spacing_mm.size()) +
                                     " entries but patch_size has " +
                                     std::to_string(p.patch_size.size()) +
                                     ": both list the network's spatial axes");
    }
    if (const json* v = r.member(root, "", "axis_order", true)) {
        const std::string s = r.string(*v, "axis_order");
        if (s == "zyx") {
            p.axis_order = AxisOrder::kZyx;
        } else if (s == "xyz") {
            p.axis_order = AxisOrder::kXyz;
        } else if (r.ok()) {
            r.fail("axis_order",
                   "expected \"zyx\" (nnU-Net arrays) or \"xyz\" (MONAI), got \"" + s + "\"");
        }
    }
    if (const json* v = r.member(root, "", "orientation", true)) {
        p.orientation = r.string(*v, "orientation");
        if (r.ok() && p.orientation != "native" && !validOrientation(p.orientation))
            r.fail("orientation",
                   "expected \"native\" or a code of one letter from each of R/L, "
                   "A/P, S/I such as \"RAS\" or \"LPS\", got \"" +
                       p.orientation + "\"");
    }
}

// labels: {value, name, color, category, type}, values and names unique.
void readLabels(Reader& r, const json& root, ModelPackage& p) {
    if (const json* v = r.member(root, "", "labels", true);
        v && r.array(*v, "labels", "{value, name, color, ...} objects")) {
        if (v->empty()) r.fail("labels", "must list at least one label");
        if (v->size() > readLimits().labels)
            r.fail("labels", fmt::format("lists {} labels > limit {} labels; raise --max-labels "
                                         "if this is real",
                                         v->size(), readLimits().labels));
        std::set<int> values;
        std::set<std::string> names;
        for (size_t i = 0; i < v->size() && r.ok(); ++i) {
            const std::string key = Reader::index("labels", i);
            const json& l = (*v)[i];
            if (!r.object(l, key)) break;
            r.onlyKeys(l, key,
                       {"value", "name", "color", "category", "type", "type_modifier",
                        "plausible_volume_ml"});
            LabelInfo label;
            if (const json* x = r.member(l, key, "value", true))
                label.value = static_cast<int>(r.integer(*x, Reader::join(key, "value"), 1, 32767));
            if (const json* x = r.member(l, key, "name", true))
                label.name = r.string(*x, Reader::join(key, "name"));
            if (const json* x = r.member(l, key, "color", true)) {
                const std::string ckey = Reader::join(key, "color");
                if (!x->is_array() || x->size() != 3) {
                    r.failType(ckey, "[r, g, b] with values 0..255", *x);
                } else {
                    for (size_t c = 0; c < 3; ++c)
                        label.color[c] = static_cast<uint8_t>(
                            r.integer((*x)[c], Reader::index(ckey, c), 0, 255));
                }
            }
            if (const json* x = r.member(l, key, "category", false))
                label.category = readConcept(r, *x, Reader::join(key, "category"))
                                     .value_or(defaultLabelCategory());
            if (const json* x = r.member(l, key, "type", false))
                label.type =
                    readConcept(r, *x, Reader::join(key, "type")).value_or(defaultLabelType());
            if (const json* x = r.member(l, key, "type_modifier", false))
                label.type_modifier = readConcept(r, *x, Reader::join(key, "type_modifier"));
            if (const json* x = r.member(l, key, "plausible_volume_ml", false))
                readPlausibleVolume(r, *x, Reader::join(key, "plausible_volume_ml"), label.value,
                                    p.plausible_volumes);
            if (!r.ok()) break;
            if (!values.insert(label.value).second)
                r.fail(Reader::join(key, "value"),
                       "label value " + std::to_string(label.value) +
                           " is used twice: each label needs its own value");
            if (!names.insert(label.name).second)
                r.fail(Reader::join(key, "name"),
                       "label name \"" + label.name + "\" is used twice");
            p.labels.push_back(label);
        }
    }
}

// output (version 1): softmax or sigmoid.
void readOutputKind(Reader& r, const json& root, ModelPackage& p) {
    if (const json* v = r.member(root, "", "output", true)) {
        const std::string s = r.string(*v, "output");
        if (s == "softmax") {
            p.output = OutputKind::kSoftmax;
        } else if (s == "sigmoid") {
            p.output = OutputKind::kSigmoid;
        } else if (r.ok()) {
            r.fail("output",
                   "expected \"softmax\" (channel 0 = background) or \"sigmoid\" (one "
                   "channel per label), got \"" +
                       s + "\"");
        }
    }
}

// sha256 of model.onnx, or models (an ensemble of {file, sha256}) (version 1).
void readModelFiles(Reader& r, const json& root, ModelPackage& p) {
    const json* sha = r.member(root, "", "sha256", false);
    const json* models = r.member(root, "", "models", false);
    if (r.ok()) {
        if (sha && models) {
            r.fail("models",
                   "give either sha256 (for model.onnx) or models (an ensemble), not both");
        } else if (sha) {
            const std::string h = r.string(*sha, "sha256");
            if (r.ok() && !isHex64(h))
                r.fail(
                    "sha256",
                    "expected 64 lower-case hex digits (sha256sum model.onnx), got \"" + h + "\"");
            p.models.push_back({"model.onnx", h});
        } else if (models) {
            if (r.array(*models, "models", "{file, sha256} objects") && models->empty())
                r.fail("models", "must list at least one ONNX file");
            if (r.ok() && models->size() > kMaxModelFiles)
                r.fail("models", fmt::format("lists {} ONNX files > limit {} files (core/limits.h)",
                                             models->size(), kMaxModelFiles));
            for (size_t i = 0; r.ok() && i < models->size(); ++i) {
                const std::string key = Reader::index("models", i);
                const json& m = (*models)[i];
                if (!r.object(m, key)) break;
                r.onlyKeys(m, key, {"file", "sha256"});
                ModelFile f;
                if (const json* x = r.member(m, key, "file", true))
                    f.file = r.string(*x, Reader::join(key, "file"));
                if (const json* x = r.member(m, key, "sha256", true))
                    f.sha256 = r.string(*x, Reader::join(key, "sha256"));
                if (!r.ok()) break;
                const std::filesystem::path fp(f.file);
                if (fp.is_absolute() || fp.has_parent_path() || f.file == "." || f.file == "..")
                    r.fail(Reader::join(key, "file"),
                           "must be a file name inside the package folder, got \"" + f.file + "\"");
                else if (!isHex64(f.sha256))
                    r.fail(Reader::join(key, "sha256"),
                           "expected 64 lower-case hex digits, got \"" + f.sha256 + "\"");
                p.models.push_back(f);
            }
        } else {
            r.fail("sha256",
                   "missing (required): the sha256 of model.onnx (or \"models\" for an "
                   "ensemble)");
        }
    }
}

// A package with an "interactive" section (docs/interactive.md): identity, the network file and
// the section itself (kept as JSON text for edit/interactive). A version 1 description of the
// network (channels, geometry, labels, output, inference) may be there too and is not used: the
// section says how the network runs. Stages and measurements are refused.
Result<ModelPackage> readInteractivePackage(Reader& r, const json& root, ModelPackage& p) {
    for (const char* k : {"stages", "measurements"})
        if (root.contains(k))
            r.fail(k,
                   "not used by an interactive package: its \"interactive\" section says how "
                   "the network runs (see docs/interactive.md)");
    r.onlyKeys(
        root, "",
        {"format_version", "name",        "version",    "description", "license",    "attribution",
         "citation",       "channels",    "spacing_mm", "patch_size",  "axis_order", "orientation",
         "labels",         "output",      "inference",  "sha256",      "models",     "precision",
         "intended_input", "interactive", "disclaimer", "quantization"});
    readIdentity(r, root, p, false);
    if (const json* v = r.member(root, "", "quantization", false))  // interactive int8
        readQuantization(r, *v, "quantization", p.quantization.emplace());
    if (const json* v = r.member(root, "", "intended_input", false)) {
        p.intended_input.emplace();
        readIntendedInput(r, *v, "intended_input", *p.intended_input);
    }
    if (const json* v = r.member(root, "", "interactive", true); v && r.object(*v, "interactive"))
        p.interactive_json = v->dump();
    readModelFiles(r, root, p);
    if (!r.ok()) return r.status();
    return p;
}

}  // namespace

Result<ModelPackage> parseModelPackage(const std::string& json_text, const std::string& source,
                                       const std::filesystem::path& folder) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {
        // e.what() carries the byte position: "[json.exception.parse_error.101] parse error at
        // line 3, column 5: ..."; a number too large for a double is out_of_range.406 (found by
        // fuzz_model_json: it escaped as an uncaught exception).
        return corruptData(std::string("model.json is not valid JSON: ") + e.what(), source);
    }
    Reader r(source);
    if (!root.is_object())
        return invalidArgument(
            std::string("model.json must hold a JSON object, got ") + jsonTypeName(root), source);
    ModelPackage p;
    p.folder = folder;

    if (const json* v = r.member(root, "", "format_version", false)) {
        p.format_version = static_cast<int>(r.integer(*v, "format_version", 1, 1000000));
        if (r.ok() && p.format_version > 2)
            return unsupported("model.json has format_version " + std::to_string(p.format_version) +
                                   "; this voxseg reads versions 1 and 2: update voxseg",
                               source);
    }
    if (root.contains("interactive")) return readInteractivePackage(r, root, p);
    const bool v2 = p.format_version >= 2;
    checkTopLevelKeys(r, root, v2);
    readIdentity(r, root, p);
    readChannels(r, root, v2, p);
    readGeometry(r, root, v2, p);
    readLabels(r, root, p);
    if (const json* v = r.member(root, "", "intended_input", false)) {
        p.intended_input.emplace();
        readIntendedInput(r, *v, "intended_input", *p.intended_input);
    }
    if (v2) {
        readStages(r, root, p);
        if (!r.ok()) return r.status();
        return p;
    }
    readOutputKind(r, root, p);
    if (const json* v = r.member(root, "", "inference", false))
        readInference(r, *v, "inference", static_cast<int64_t>(p.patch_size.size()), p.inference);
    if (r.ok() && !p.inference.output_size.empty())
        r.fail("inference.output_size", "only a stage takes it (format_version 2)");

    readModelFiles(r, root, p);
    if (!r.ok()) return r.status();
    return p;
}

Result<ModelPackage> readModelPackage(const std::filesystem::path& folder) {
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec))
        return notFound(
            "model package folder not found (expected a folder with model.json and "
            "model.onnx)",
            folder.string());
    const auto json_path = folder / "model.json";
    if (!std::filesystem::is_regular_file(json_path, ec))
        return notFound("model package has no model.json", folder.string());
    VOXSEG_ASSIGN_OR_RETURN(
        std::string text,
        readFileBytes(json_path.string(), "model.json",
                      {kMaxModelJsonBytes, "4 MiB is more than a model description needs"}));
    return parseModelPackage(text, json_path.string(), folder);
}

namespace {

Status verifyModelFile(const ModelPackage& package, const ModelFile& f) {
    const auto path = package.folder / f.file;
    auto hash = sha256File(path);
    if (!hash.isOk()) {
        if (hash.status().code() == StatusCode::kNotFound)
            return notFound(f.file + " named in model.json is missing from the package",
                            path.string());
        return hash.status();
    }
    if (*hash != f.sha256)
        return corruptData(f.file +
                               " does not match model.json's sha256: the package is "
                               "damaged or was edited (expected " +
                               f.sha256 + ", file has " + *hash + ")",
                           path.string());
    return Status::ok();
}

}  // namespace

Status verifyModelFiles(const ModelPackage& package) {
    for (const ModelFile& f : package.models) VOXSEG_RETURN_IF_ERROR(verifyModelFile(package, f));
    return Status::ok();
}

Result<Graph> loadStageGraph(const ModelPackage& package, size_t stage) {
    if (stage >= package.stages.size())
        return invalidArgument("model " + package.name + " has no stage " + std::to_string(stage));
    VOXSEG_RETURN_IF_ERROR(verifyModelFile(package, package.stages[stage].model));
    return detail::importStageGraph(package.folder, package, stage);
}

std::string modelPackageToJson(const ModelPackage& p) {
    json j;
    j["format_version"] = p.format_version;
    j["name"] = p.name;
    j["version"] = p.version;
    j["description"] = p.description;
    j["license"] = p.license;
    if (!p.attribution.empty()) j["attribution"] = p.attribution;
    if (!p.disclaimer.empty()) j["disclaimer"] = p.disclaimer;
    if (p.isInteractive()) {
        if (!p.citation.empty()) j["citation"] = p.citation;
        if (p.precision.requires_fp32) j["precision"] = precisionJson(p.precision);
        if (p.intended_input) j["intended_input"] = intendedInputJson(*p.intended_input);
        json models = json::array();
        for (const auto& m : p.models) models.push_back({{"file", m.file}, {"sha256", m.sha256}});
        j["models"] = models;
        j["interactive"] = json::parse(p.interactive_json);
        return j.dump(2) + "\n";
    }
    const bool v2 = p.hasStages();
    if (v2 && !p.citation.empty()) j["citation"] = p.citation;
    if (p.precision.requires_fp32) j["precision"] = precisionJson(p.precision);
    if (p.quantization) j["quantization"] = quantizationJson(*p.quantization);
    json channels = json::array();
    for (const auto& c : p.channels) {
        json cj{{"modality", c.modality}, {"name", c.name}};
        if (!v2) cj["normalization"] = normalizationJson(c.normalization);
        if (!c.match.empty()) cj["match"] = seriesMatchJson(c.match);
        channels.push_back(cj);
    }
    j["channels"] = channels;
    if (!v2) {
        j["spacing_mm"] = p.spacing_mm;
        j["patch_size"] = p.patch_size;
    }
    j["axis_order"] = p.axis_order == AxisOrder::kZyx ? "zyx" : "xyz";
    j["orientation"] = p.orientation;
    json labels = json::array();
    for (const auto& l : p.labels) {
        json lj{
            {"value", l.value}, {"name", l.name}, {"color", {l.color[0], l.color[1], l.color[2]}}};
        // The default codes go without saying (a label that states none has them).
        if (l.category != defaultLabelCategory()) lj["category"] = conceptJson(l.category);
        if (l.type != defaultLabelType()) lj["type"] = conceptJson(l.type);
        if (l.type_modifier) lj["type_modifier"] = conceptJson(*l.type_modifier);
        for (const PlausibleVolume& v : p.plausible_volumes)
            if (v.label == l.value) lj["plausible_volume_ml"] = {v.low_ml, v.high_ml};
        labels.push_back(lj);
    }
    j["labels"] = labels;
    if (p.intended_input) j["intended_input"] = intendedInputJson(*p.intended_input);
    if (v2) {
        json stages = json::array();
        for (const StageSpec& st : p.stages) stages.push_back(stageJson(st));
        j["stages"] = stages;
        if (!p.measurements.empty()) {
            json ms = json::array();
            for (const MeasurementSpec& m : p.measurements)
                ms.push_back({{"name", m.name},
                              {"kind", m.kind},
                              {"labels", m.labels},
                              {"description", m.description}});
            j["measurements"] = ms;
        }
        return j.dump(2) + "\n";
    }
    j["output"] = p.output == OutputKind::kSoftmax ? "softmax" : "sigmoid";
    j["inference"] = inferenceJson(p.inference);
    if (p.models.size() == 1 && p.models[0].file == "model.onnx") {
        j["sha256"] = p.models[0].sha256;
    } else {
        json models = json::array();
        for (const auto& m : p.models) models.push_back({{"file", m.file}, {"sha256", m.sha256}});
        j["models"] = models;
    }
    return j.dump(2) + "\n";
}

Result<LoadedModel> loadModelPackage(const std::filesystem::path& folder) {
    LoadedModel model;
    VOXSEG_ASSIGN_OR_RETURN(model.package, readModelPackage(folder));
    const ModelPackage& p = model.package;
    VOXSEG_RETURN_IF_ERROR(verifyModelFiles(p));
    if (p.isInteractive())
        return unsupported(
            "model " + p.name +
                " is an interactive (promptable) package: it segments from prompts, not on its "
                "own, and runs in an interactive session (docs/interactive.md), not in voxseg "
                "segment",
            folder.string());
    if (p.hasStages()) {
        VOXSEG_RETURN_IF_ERROR(loadStages(folder, model));
        return model;
    }
    Shape input = {1, static_cast<int64_t>(p.channels.size())};
    input.insert(input.end(), p.patch_size.begin(), p.patch_size.end());
    Shape expected_output = input;
    expected_output[1] = p.outputChannels();
    for (const ModelFile& f : p.models) {
        const auto path = folder / f.file;
        OnnxImportOptions options;
        options.input_shapes = {input};
        auto graph = importOnnx(path, options);
        if (!graph.isOk())
            return graph.status().withContext(f.file + " (for input " + shapeToString(input) +
                                              " from model.json's channels and patch_size): ");
        if (graph->inputs.size() != 1)
            return unsupported(f.file + " has " + std::to_string(graph->inputs.size()) +
                                   " inputs; voxseg runs networks with one input (the channels "
                                   "stacked)",
                               path.string());
        if (graph->outputs.empty()) return corruptData(f.file + " has no outputs", path.string());
        const Shape& out = graph->values[graph->outputs[0]].shape;
        if (out != expected_output) {
            const std::string what =
                p.output == OutputKind::kSoftmax
                    ? "softmax: background + " + std::to_string(p.labels.size()) + " labels"
                    : "sigmoid: one channel per label, " + std::to_string(p.labels.size());
            return invalidArgument(f.file + " produces " + shapeToString(out) + " for input " +
                                       shapeToString(input) + ", but model.json expects " +
                                       shapeToString(expected_output) + " (" + what +
                                       ", same spatial shape as the patch)",
                                   path.string());
        }
        model.graphs.push_back(std::move(graph).value());
    }
    return model;
}

namespace {

// The one place that picks where a package's window runs: the backend's own
// (Backend::makeSlidingWindow), except for nnU-Net's fp16 arithmetic, which only the host window
// reproduces (over networks the backend compiles).
Result<std::unique_ptr<VolumeInference>> makeWindow(Backend& backend,
                                                    const std::vector<const Graph*>& graphs,
                                                    int64_t channels,
                                                    const SlidingWindowOptions& options) {
    if (options.accumulation != Accumulation::kNnUNetFp16)
        return backend.makeSlidingWindow(graphs, channels, options);
    VOXSEG_ASSIGN_OR_RETURN(auto window, SlidingWindow::create(backend, graphs, channels, options));
    return std::unique_ptr<VolumeInference>(std::move(window));
}

}  // namespace

Result<std::unique_ptr<VolumeInference>> createSlidingWindow(Backend& backend,
                                                             const LoadedModel& model, int batch,
                                                             const CompileOptions& compile,
                                                             DType accumulator) {
    if (model.package.hasStages())
        return unsupported("model " + model.package.name +
                           " has stages (format_version 2): each stage has its own window");
    SlidingWindowOptions options = model.package.slidingWindowOptions();
    options.batch = batch;
    options.accumulator = accumulator;
    options.compile = compile;
    std::vector<const Graph*> graphs;
    for (const Graph& g : model.graphs) graphs.push_back(&g);
    auto sw =
        makeWindow(backend, graphs, static_cast<int64_t>(model.package.channels.size()), options);
    if (!sw.isOk()) return sw.status().withContext("model " + model.package.name + ": ");
    return sw;
}

Result<std::unique_ptr<VolumeInference>> createStageWindow(Backend& backend, const ModelPackage& p,
                                                           const Graph& graph, size_t stage,
                                                           int batch,
                                                           const CompileOptions& compile) {
    if (stage >= p.stages.size())
        return invalidArgument("model " + p.name + " has no stage " + std::to_string(stage));
    SlidingWindowOptions options = p.stages[stage].slidingWindowOptions();
    options.batch = batch;
    options.accumulator = DType::kFloat32;
    options.compile = compile;
    auto sw =
        makeWindow(backend, {&graph}, p.stages[stage].inputChannels(p.channels.size()), options);
    if (!sw.isOk())
        return sw.status().withContext("model " + p.name + ", stage " + p.stages[stage].name +
                                       ": ");
    return sw;
}

Result<std::unique_ptr<VolumeInference>> createStageWindow(Backend& backend,
                                                           const LoadedModel& model, size_t stage,
                                                           int batch,
                                                           const CompileOptions& compile) {
    if (stage >= model.package.stages.size() || stage >= model.graphs.size())
        return invalidArgument("model " + model.package.name + " has no stage " +
                               std::to_string(stage));
    return createStageWindow(backend, model.package, model.graphs[stage], stage, batch, compile);
}

}  // namespace voxseg::engine
