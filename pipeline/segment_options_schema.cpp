#include "pipeline/segment_options_schema.h"

#include "backends/registry.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace voxseg::pipeline {
namespace {

using Kind = SegmentOptionSpec::Kind;

Result<bool> parseFlag(const std::string& flag, const std::string& text) {
    if (text == "true" || text == "1" || text == "on") return true;
    if (text == "false" || text == "0" || text == "off" || text.empty()) return false;
    return invalidArgument(fmt::format("{}: \"{}\" is not true or false", flag, text));
}

Result<double> parseNumber(const std::string& flag, const std::string& text, double lo, double hi) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != text.size() || v < lo || v > hi)
        return invalidArgument(
            fmt::format("{}: \"{}\" is not a number in [{}, {}]", flag, text, lo, hi));
    return v;
}

PostprocessOptions& postprocess(SegmentOptions& o) {
    if (!o.postprocess_all) o.postprocess_all = PostprocessOptions{};
    return *o.postprocess_all;
}

std::vector<SegmentOptionSpec> build() {
    std::vector<SegmentOptionSpec> s;
    {
        SegmentOptionSpec d;
        d.flag = "--device";
        d.label = "Device";
        d.group = "Inference";
        d.kind = Kind::kChoice;
        d.help = "auto (best available), cpu, reference, cuda or cuda:N (GPU N)";
        d.choices = {"auto", "cpu", "reference", "cuda"};
        d.default_text = "auto";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(o.device, engine::parseDevice(t, "--device"));
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) { return o.device.toString(); };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--precision";
        d.label = "Precision";
        d.group = "Inference";
        d.help =
            "auto (the backend's choice: bf16 on GPUs of sm_80+, CPUs with AMX and AMD CPUs with "
            "avx512_bf16, else fp32; "
            "fp32 when model.json requires it), fp32, fp16, bf16";
        d.choices = {"auto", "fp32", "fp16", "bf16"};
        d.default_text = "auto";
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
    }
    {
        SegmentOptionSpec d;
        d.flag = "--overlap";
        d.label = "Overlap";
        d.group = "Inference";
        d.kind = Kind::kNumber;
        d.help = "Sliding-window overlap in [0, 1) (default: model's)";
        d.min = 0.0;
        d.max = 0.95;
        d.default_text = "";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            if (t.empty()) {
                o.overlap.reset();
                return Status::ok();
            }
            VOXSEG_ASSIGN_OR_RETURN(const double v, parseNumber("--overlap", t, 0.0, 0.95));
            o.overlap = v;
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) {
            return o.overlap ? fmt::format("{}", *o.overlap) : std::string();
        };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--batch";
        d.label = "Batch";
        d.group = "Inference";
        d.kind = Kind::kInteger;
        d.help = "Patches per forward pass";
        d.min = 1;
        d.max = 64;
        d.default_text = "1";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(const double v, parseNumber("--batch", t, 1, 64));
            if (v != static_cast<int>(v)) return invalidArgument("--batch: a whole number");
            o.batch = static_cast<int>(v);
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) { return std::to_string(o.batch); };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--accumulator";
        d.label = "Accumulator";
        d.group = "Inference";
        d.help =
            "Sliding-window score sums: fp16 (half the memory, as nnU-Net v2) or fp32; packages "
            "whose model.json sets \"accumulate\": \"nnunet-fp16\" always sum as nnU-Net does";
        d.choices = {"fp16", "fp32"};
        d.default_text = "fp16";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(o.accumulator, parseAccumulator(t));
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) {
            return std::string(accumulatorName(o.accumulator));
        };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--tta";
        d.label = "Mirror on all axes";
        d.group = "Test-time augmentation";
        d.kind = Kind::kFlag;
        d.help = "Mirroring test-time augmentation on all axes (8x slower)";
        d.default_text = "false";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(const bool on, parseFlag("--tta", t));
            if (on && o.no_tta) return invalidArgument("--tta excludes --no-tta");
            o.tta = on;
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) { return std::string(o.tta ? "true" : "false"); };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--no-tta";
        d.label = "No mirroring";
        d.group = "Test-time augmentation";
        d.kind = Kind::kFlag;
        d.help = "No mirroring, even where the model package asks for it (inference.mirror_axes)";
        d.default_text = "false";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(const bool on, parseFlag("--no-tta", t));
            if (on && o.tta) return invalidArgument("--no-tta excludes --tta");
            o.no_tta = on;
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) {
            return std::string(o.no_tta ? "true" : "false");
        };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--largest-component";
        d.label = "Largest component only";
        d.group = "Post-processing";
        d.kind = Kind::kFlag;
        d.help = "Keep only the largest connected component of each label";
        d.default_text = "false";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(const bool on, parseFlag("--largest-component", t));
            if (on || o.postprocess_all) postprocess(o).largest_component = on;
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) {
            return std::string(o.postprocess_all && o.postprocess_all->largest_component ? "true"
                                                                                         : "false");
        };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--min-component-ml";
        d.label = "Remove components below (mL)";
        d.group = "Post-processing";
        d.kind = Kind::kNumber;
        d.help = "Remove components smaller than this (mL)";
        d.min = 0;
        d.max = 1e6;
        d.default_text = "0";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(const double v,
                                    parseNumber("--min-component-ml", t.empty() ? "0" : t, 0, 1e6));
            if (v > 0 || o.postprocess_all) postprocess(o).min_component_ml = v;
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) {
            return fmt::format("{}", o.postprocess_all ? o.postprocess_all->min_component_ml : 0.0);
        };
        s.push_back(d);
    }
    {
        SegmentOptionSpec d;
        d.flag = "--fill-holes";
        d.label = "Fill holes (3D)";
        d.group = "Post-processing";
        d.kind = Kind::kFlag;
        d.help = "Fill holes inside each label (3D)";
        d.default_text = "false";
        d.apply = [](const std::string& t, SegmentOptions& o) -> Status {
            VOXSEG_ASSIGN_OR_RETURN(const bool on, parseFlag("--fill-holes", t));
            if (on || o.postprocess_all)
                postprocess(o).fill_holes = on ? HoleFilling::k3D : HoleFilling::kNone;
            return Status::ok();
        };
        d.current = [](const SegmentOptions& o) {
            return std::string(
                o.postprocess_all && o.postprocess_all->fill_holes != HoleFilling::kNone ? "true"
                                                                                         : "false");
        };
        s.push_back(d);
    }
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

Status applySegmentOption(const std::string& flag, const std::string& text,
                          SegmentOptions& options) {
    for (const auto& s : segmentOptionSchema())
        if (s.flag == flag) return s.apply(text, options);
    return invalidArgument(fmt::format("unknown segment option {}", flag));
}

}  // namespace voxseg::pipeline
