// The options of `voxseg segment` that a user picks per run (device, precision, sliding-window
// overlap, batch, accumulator, test-time augmentation, post-processing), described once: flag,
// label, group, kind, help, choices, range and default, with the function that applies a
// value's text to pipeline::SegmentOptions through the same parsers the engine uses. The CLI
// (app/cmd_segment.cpp, for segment and batch) registers these options from here and the
// viewer's "Run model" dialog builds its form from it; both apply the values with the specs'
// apply functions, so nothing is listed or mapped twice. Qt-free; immutable after first use,
// thread-safe.
#pragma once

#include "core/status.h"
#include "pipeline/segment.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

struct SegmentOptionSpec {
    enum class Kind { kChoice, kNumber, kInteger, kFlag };
    std::string flag;   // "--overlap"
    std::string label;  // "Overlap" (dialog)
    std::string group;  // "Inference", "Test-time augmentation", "Post-processing"
    Kind kind = Kind::kChoice;
    std::string help;
    // kChoice: the values offered (the text may also be another value the parser accepts, e.g.
    // cuda:1); "" in a kNumber's default_text means "the model's".
    std::vector<std::string> choices;
    double min = 0, max = 0;  // kNumber / kInteger
    std::string default_text;
    // Applies `text` ("true"/"false" for flags; "" for a number: the default) to `options`;
    // errors name the flag and the accepted values.
    Status (*apply)(const std::string& text, SegmentOptions& options) = nullptr;
    // The value in `options` as text (what the dialog shows).
    std::string (*current)(const SegmentOptions& options) = nullptr;
};

const std::vector<SegmentOptionSpec>& segmentOptionSchema();
// The spec of a flag ("--device"); an unknown flag is a programming error (aborts).
const SegmentOptionSpec& segmentOptionSpec(const std::string& flag);
// segmentOptionSpec(flag).apply, with an unknown flag reported as an error.
Status applySegmentOption(const std::string& flag, const std::string& text,
                          SegmentOptions& options);

}  // namespace voxseg::pipeline
