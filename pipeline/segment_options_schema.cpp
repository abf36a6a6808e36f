#include "pipeline/segment_options_schema.h"

#include "backends/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace voxseg::pipeline {
namespace {

using Kind = SegmentOptionSpec::Kind;

constexpr int kMaxBatch = 64;
constexpr double kMaxOverlap = 0.95;
constexpr double kMaxComponentMl = 1e6;

// The rules, one function and one message each (checkSegmentOptions runs them all).
Status ttaRule(const SegmentOptions& o) {
    if (o.tta && o.no_tta) return invalidArgument("--tta and --no-tta exclude each other");
    return Status::ok();
}

Status batchError(const std::string& value) {
    return invalidArgument(
        fmt::format("--batch: {} is not a whole number in [1, {}]", value, kMaxBatch));
}

Status batchRule(const SegmentOptions& o) {
    if (o.batch < 1 || o.batch > kMaxBatch) return batchError(std::to_string(o.batch));
    return Status::ok();
}

Status overlapRule(const SegmentOptions& o) {
    if (o.overlap && !(*o.overlap >= 0.0 && *o.overlap <= kMaxOverlap))
        return invalidArgument(
            fmt::format("--overlap: {} is not a number in [0, {}]", *o.overlap, kMaxOverlap));
    return Status::ok();
}

Status accumulatorRule(const SegmentOptions& o) {
    if (o.accumulator != engine::DType::kFloat16 && o.accumulator != engine::DType::kFloat32)
        return invalidArgument(
            fmt::format("--accumulator: {} is not fp16 or fp32", engine::dtypeName(o.accumulator)));
    return Status::ok();
}

// `next` replaces `o` when `rule` accepts it (apply leaves `o` as it was on an error).
Status commit(SegmentOptions& o, SegmentOptions&& next, Status (*rule)(const SegmentOptions&)) {
    if (rule) VOXSEG_RETURN_IF_ERROR(rule(next));
    o = std::move(next);
    return Status::ok();
}

Result<bool> parseFlag(const std::string& flag, const std::string& text) {
    if (text == "true" || text == "1" || text == "on") return true;
    if (text == "false" || text == "0" || text == "off" || text.empty()) return false;
    return invalidArgument(fmt::format("{}: \"{}\" is not true or false", flag, text));
}

// A number (the range is the rules' business).
Result<double> parseNumber(const std::string& flag, const std::string& text) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != text.size())
        return invalidArgument(fmt::format("{}: \"{}\" is not a number", flag, text));
    return v;
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
    return out;
}

const char* onOff(bool on) { return on ? "true" : "false"; }

PostprocessOptions& postprocess(SegmentOptions& o) {
    if (!o.postprocess_all) o.postprocess_all = PostprocessOptions{};
    return *o.postprocess_all;
}

SegmentOptionSpec spec(const char* flag, const char* label, const char* group, Kind kind,
                       const char* help, const char* default_text) {
    SegmentOptionSpec d;
    d.flag = flag;
    d.key = d.flag.substr(2);
    std::replace(d.key.begin(), d.key.end(), '-', '_');
    d.label = label;
    d.group = group;
    d.kind = kind;
    d.help = help;
    d.default_text = default_text;
    return d;
}

void addInference(std::vector<SegmentOptionSpec>& s) {
    auto d = spec("--device", "Device", "Inference", Kind::kChoice,
                  "auto (best available), cpu, reference, cuda or cuda:N (GPU N)", "auto");
    d.choices = {"auto", "cpu", "reference", "cuda"};
    d.affects_results = false;
    d.advanced = true;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(o.device, engine::parseDevice(t, "--device"));
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) { return o.device.toString(); };
    s.push_back(d);

    d = spec("--precision", "Precision", "Inference", Kind::kChoice,
             "auto (the backend's choice: bf16 on GPUs of sm_80+, CPUs with AMX and AMD CPUs with "
             "avx512_bf16, else fp32; fp32 when model.json requires it), fp32, fp16, bf16, int8 "
             "(cpu: a package calibrated and validated by `voxseg model calibrate`), fp8 (cuda on "
             "sm_89+: the same package's scales in e4m3)",
             "auto");
    d.choices = {"auto", "fp32", "fp16", "bf16", "int8", "fp8"};
    d.advanced = true;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        auto p = engine::parsePrecision(t);
        if (!p.isOk()) return p.status().withContext("--precision");
        o.precision = *p;
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) {
        return std::string(engine::precisionName(o.precision));
    };
    s.push_back(d);

    d = spec("--overlap", "Overlap", "Inference", Kind::kNumber,
             "Sliding-window overlap in [0, 0.95] (default: model's)", "");
    d.max = kMaxOverlap;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        SegmentOptions next = o;
        if (t.empty()) {
            next.overlap.reset();
        } else {
            VOXSEG_ASSIGN_OR_RETURN(next.overlap, parseNumber("--overlap", t));
        }
        return commit(o, std::move(next), overlapRule);
    };
    d.current = [](const SegmentOptions& o) {
        return o.overlap ? fmt::format("{}", *o.overlap) : std::string();
    };
    s.push_back(d);

    d = spec("--batch", "Batch", "Inference", Kind::kInteger, "Patches per forward pass", "1");
    d.min = 1;
    d.max = kMaxBatch;
    d.affects_results = false;
    d.advanced = true;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(const double v, parseNumber("--batch", t));
        // Not whole, or too large for an int: the rule's message, on the text.
        if (!(v >= 0 && v <= kMaxBatch) || v != std::floor(v)) return batchError(t);
        SegmentOptions next = o;
        next.batch = static_cast<int>(v);
        return commit(o, std::move(next), batchRule);
    };
    d.current = [](const SegmentOptions& o) { return std::to_string(o.batch); };
    s.push_back(d);

    d = spec("--accumulator", "Accumulator", "Inference", Kind::kChoice,
             "Sliding-window score sums: fp16 (half the memory, as nnU-Net v2) or fp32; packages "
             "whose model.json sets \"accumulate\": \"nnunet-fp16\" always sum as nnU-Net does",
             "fp16");
    d.choices = {"fp16", "fp32"};
    d.advanced = true;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        auto a = parseAccumulator(t);
        if (!a.isOk()) return a.status().withContext("--accumulator");
        SegmentOptions next = o;
        next.accumulator = *a;
        return commit(o, std::move(next), accumulatorRule);
    };
    d.current = [](const SegmentOptions& o) { return std::string(accumulatorName(o.accumulator)); };
    s.push_back(d);
}

void addMirroring(std::vector<SegmentOptionSpec>& s) {
    auto d = spec("--tta", "Mirror on all axes", "Test-time augmentation", Kind::kFlag,
                  "Mirroring test-time augmentation on all axes (8x slower)", "false");
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        SegmentOptions next = o;
        VOXSEG_ASSIGN_OR_RETURN(next.tta, parseFlag("--tta", t));
        return commit(o, std::move(next), ttaRule);
    };
    d.current = [](const SegmentOptions& o) { return std::string(onOff(o.tta)); };
    s.push_back(d);

    d = spec("--no-tta", "No mirroring", "Test-time augmentation", Kind::kFlag,
             "No mirroring, even where the model package asks for it (inference.mirror_axes)",
             "false");
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        SegmentOptions next = o;
        VOXSEG_ASSIGN_OR_RETURN(next.no_tta, parseFlag("--no-tta", t));
        return commit(o, std::move(next), ttaRule);
    };
    d.current = [](const SegmentOptions& o) { return std::string(onOff(o.no_tta)); };
    s.push_back(d);
}

void addPostprocessing(std::vector<SegmentOptionSpec>& s) {
    auto d = spec("--largest-component", "Largest component only", "Post-processing", Kind::kFlag,
                  "Keep only the largest connected component of each label", "false");
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(const bool on, parseFlag("--largest-component", t));
        if (on || o.postprocess_all) postprocess(o).largest_component = on;
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) {
        return std::string(onOff(o.postprocess_all && o.postprocess_all->largest_component));
    };
    s.push_back(d);

    d = spec("--min-component-ml", "Remove components below (mL)", "Post-processing", Kind::kNumber,
             "Remove components smaller than this (mL)", "0");
    d.max = kMaxComponentMl;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(const double v,
                                parseNumber("--min-component-ml", t.empty() ? "0" : t));
        if (!(v >= 0 && v <= kMaxComponentMl))
            return invalidArgument(fmt::format("--min-component-ml: {} is not a number in [0, {}]",
                                               t, kMaxComponentMl));
        if (v > 0 || o.postprocess_all) postprocess(o).min_component_ml = v;
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) {
        return fmt::format("{}", o.postprocess_all ? o.postprocess_all->min_component_ml : 0.0);
    };
    s.push_back(d);

    d = spec("--fill-holes", "Fill holes (3D)", "Post-processing", Kind::kFlag,
             "Fill holes inside each label (3D)", "false");
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(const bool on, parseFlag("--fill-holes", t));
        if (on || o.postprocess_all)
            postprocess(o).fill_holes = on ? HoleFilling::k3D : HoleFilling::kNone;
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) {
        return std::string(
            onOff(o.postprocess_all && o.postprocess_all->fill_holes != HoleFilling::kNone));
    };
    s.push_back(d);
}

// What is written (the viewer decides its own files: not in its dialog).
void addOutputs(std::vector<SegmentOptionSpec>& s) {
    auto d = spec("--outputs", "Outputs", "Outputs", Kind::kList,
                  "Comma-separated: nifti, seg, rtstruct, stats, preview, probabilities, masks "
                  "(masks/<label name>.nii.gz per label), ts-stats "
                  "(statistics_totalsegmentator.json as TotalSegmentator --statistics writes it)",
                  "nifti,stats,preview");
    d.choices = {"nifti",   "seg",           "rtstruct", "stats",
                 "preview", "probabilities", "masks",    "ts-stats"};
    d.in_dialog = false;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        auto parsed = parseOutputs(t);
        if (!parsed.isOk()) return parsed.status().withContext("--outputs");
        parsed->label_format = o.outputs.label_format;
        parsed->seg_type = o.outputs.seg_type;
        o.outputs = *parsed;
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) { return outputsName(o.outputs); };
    s.push_back(d);

    d = spec("--seg-type", "SEG type", "Outputs", Kind::kChoice,
             "DICOM SEG kind: binary (Segmentation IOD, default) or labelmap (Label Map "
             "Segmentation IOD, DICOM 2024)",
             "binary");
    d.choices = {"binary", "labelmap"};
    d.in_dialog = false;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        auto type = io::parseSegType(t);
        if (!type.isOk()) return type.status().withContext("--seg-type");
        o.outputs.seg_type = *type;
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) {
        return std::string(o.outputs.seg_type == io::SegType::kLabelMap ? "labelmap" : "binary");
    };
    s.push_back(d);

    d = spec("--format", "Label map format", "Outputs", Kind::kChoice,
             "Label map format: nii.gz, nii, nrrd, mha", "nii.gz");
    d.choices = {"nii.gz", "nii", "nrrd", "mha"};
    d.in_dialog = false;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        for (const char* f : {"nii.gz", "nii", "nrrd", "mha"})
            if (t == f) {
                o.outputs.label_format = t;
                return Status::ok();
            }
        return invalidArgument(
            fmt::format("--format: \"{}\" is not one of nii.gz, nii, nrrd, mha", t));
    };
    d.current = [](const SegmentOptions& o) { return o.outputs.label_format; };
    s.push_back(d);

    d = spec("--labels", "Labels", "Outputs", Kind::kText,
             "Comma-separated label names (model.json): write only these structures and run only "
             "the stages they need",
             "");
    d.in_dialog = false;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        std::vector<std::string> names;
        std::stringstream list(t);
        for (std::string name; std::getline(list, name, ',');)
            if (!name.empty()) names.push_back(name);
        if (!t.empty() && names.empty()) return invalidArgument("--labels: lists no label name");
        o.labels = names;
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) { return join(o.labels); };
    s.push_back(d);

    d = spec("--stats-include-incomplete", "Measure labels at the border", "Outputs", Kind::kFlag,
             "ts-stats: measure labels that touch the image border too (TotalSegmentator's "
             "--stats_include_incomplete; by default they get 0)",
             "false");
    d.in_dialog = false;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(o.ts_stats_include_incomplete,
                                parseFlag("--stats-include-incomplete", t));
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) {
        return std::string(onOff(o.ts_stats_include_incomplete));
    };
    s.push_back(d);

    d = spec("--ignore-modality", "Run anyway (ignore modality)", "Input checks", Kind::kFlag,
             "Run even when the input modality differs from the model's", "false");
    d.in_dialog = false;  // the dialog offers it only on a mismatch, next to the reason
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(o.ignore_modality, parseFlag("--ignore-modality", t));
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) { return std::string(onOff(o.ignore_modality)); };
    s.push_back(d);
}

// The model card's intended input (model.json "intended_input", pipeline/input_checks.h). Not
// in the resume hash: a run it lets through writes what it would write without it.
void addInputChecks(std::vector<SegmentOptionSpec>& s) {
    auto d = spec("--strict-input", "Refuse unsuitable input", "Input checks", Kind::kFlag,
                  "Refuse an input outside the model's intended input (model.json "
                  "intended_input: modality, extent, spacing, crops) instead of running it with "
                  "a warning",
                  "false");
    d.affects_results = false;
    d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
        VOXSEG_ASSIGN_OR_RETURN(o.strict_input, parseFlag("--strict-input", t));
        return Status::ok();
    };
    d.current = [](const SegmentOptions& o) { return std::string(onOff(o.strict_input)); };
    s.push_back(d);
}

std::vector<SegmentOptionSpec> build() {
    std::vector<SegmentOptionSpec> s;
    addInference(s);
    addMirroring(s);
    addPostprocessing(s);
    addOutputs(s);
    addInputChecks(s);
    return s;
}

}  // namespace

const std::vector<SegmentOptionSpec>& segmentOptionSchema() {
    static const std::vector<SegmentOptionSpec> schema = build();
    return schema;
}

const SegmentOptionSpec& segmentOptionSpec(const std::string& flag) {
    for (const auto& s : segmentOptionSchema())
        if (s.flag == flag) return s;
    std::fprintf(stderr, "segmentOptionSpec: no option %s\n", flag.c_str());
    std::abort();
}

const SegmentOptionSpec* findSegmentOptionByKey(const std::string& key) {
    for (const auto& s : segmentOptionSchema())
        if (s.key == key) return &s;
    return nullptr;
}

Status applySegmentOption(const std::string& flag, const std::string& text,
                          SegmentOptions& options) {
    for (const auto& s : segmentOptionSchema())
        if (s.flag == flag) return s.apply(text, options);
    return invalidArgument(fmt::format("unknown segment option {}", flag));
}

std::string segmentOptionMessage(const SegmentOptionSpec& spec, const Status& status) {
    std::string message = status.message();
    if (message.rfind(spec.flag + ": ", 0) == 0) message.erase(0, spec.flag.size() + 2);
    return message;
}

Status checkSegmentOptions(const SegmentOptions& options) {
    for (auto rule : {ttaRule, batchRule, overlapRule, accumulatorRule})
        VOXSEG_RETURN_IF_ERROR(rule(options));
    return Status::ok();
}

std::vector<std::pair<std::string, std::string>> resultOptions(
    const SegmentOptions& options, const std::vector<SegmentOptionSpec>& schema) {
    const SegmentOptions defaults;
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& s : schema) {
        if (!s.affects_results) continue;
        std::string value = s.current(options);
        if (value != s.current(defaults)) out.emplace_back(s.key, std::move(value));
    }
    return out;
}

}  // namespace voxseg::pipeline
