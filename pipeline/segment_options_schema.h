// The options of a segment run that a user picks (device, precision, sliding-window overlap,
// batch, accumulator, test-time augmentation, post-processing, outputs, SEG type, label map
// format, labels, modality check), described once: flag, key, label, group, kind, help, choices,
// range, default, whether it can change the results, and the function that applies a value's
// text to pipeline::SegmentOptions through the same parsers the engine uses. Every front end
// takes them from here: the CLI (app/cmd_segment.cpp, for segment and batch) registers its flags
// from it, the viewer's "Run model" dialog builds its form from the options marked in_dialog,
// node.json routes accept every option by its key under "options", and `voxseg batch` derives its
// resume hash from the options that change results (resultOptions). The rules between options
// (tta/no-tta, the ranges of batch and overlap, the accumulator) are decided here, by
// checkSegmentOptions, which the options' apply functions and Segmenter::create both call: one
// rule, one message. Qt-free; immutable after first use, thread-safe.
#pragma once

#include "core/status.h"
#include "pipeline/segment.h"

#include <string>
#include <utility>
#include <vector>

namespace voxseg::pipeline {

struct SegmentOptionSpec {
    // kList: comma-separated names out of `choices` (a JSON array in node.json); kText: free
    // text (--labels: comma-separated label names; also an array in node.json).
    enum class Kind { kChoice, kNumber, kInteger, kFlag, kList, kText };
    std::string flag;   // "--overlap"
    std::string key;    // "overlap": node.json's name, and the resume hash's (flag, '-' as '_')
    std::string label;  // "Overlap" (dialog)
    std::string group;  // "Inference", "Test-time augmentation", "Post-processing", "Outputs"
    Kind kind = Kind::kChoice;
    std::string help;
    // kChoice: the values offered (the text may also be another value the parser accepts, e.g.
    // cuda:1); "" in a kNumber's default_text means "the model's".
    std::vector<std::string> choices;
    double min = 0, max = 0;  // kNumber / kInteger
    std::string default_text;
    // Whether the value can change what a run writes: `voxseg batch`'s resume hash holds these
    // (resultOptions). Not the device (a batch spreads cases over devices) or the batch size.
    bool affects_results = true;
    // Shown in the viewer's Run model dialog (the viewer decides its own output files;
    // --ignore-modality is offered there only when the input's modality differs, with the reason).
    bool in_dialog = true;
    // An expert's option (device, precision, batch, accumulator): the dialog folds it into a
    // collapsed "Advanced" section, `voxseg segment --help` lists it under "Advanced"; the
    // common options stay in view.
    bool advanced = false;
    // Applies `text` ("true"/"false" for flags; "" for a number: the default) to `options`;
    // errors start with the flag ("--overlap: ...") and say what is accepted. On an error
    // `options` is unchanged.
    Status (*apply)(const std::string& text, SegmentOptions& options) = nullptr;
    // The value in `options` as text (what the dialog shows; apply(current(o)) keeps o).
    std::string (*current)(const SegmentOptions& options) = nullptr;
};

const std::vector<SegmentOptionSpec>& segmentOptionSchema();
// The spec of a flag ("--device"); an unknown flag is a programming error (aborts).
const SegmentOptionSpec& segmentOptionSpec(const std::string& flag);
// The spec whose key is `key` ("precision"); null when there is none.
const SegmentOptionSpec* findSegmentOptionByKey(const std::string& key);
// segmentOptionSpec(flag).apply, with an unknown flag reported as an error.
Status applySegmentOption(const std::string& flag, const std::string& text,
                          SegmentOptions& options);
// `status`'s message without the leading "<flag>: ", for front ends that name the option their
// own way (CLI11 names the flag, node.json errors the key path).
std::string segmentOptionMessage(const SegmentOptionSpec& spec, const Status& status);

// The rules options must keep together and one by one: --tta excludes --no-tta, --batch is a
// whole number in [1, 64], --overlap in [0, 0.95], --accumulator fp16 or fp32. The first broken
// rule, its message starting with the flag. Segmenter::create calls it for options that did not
// come through apply (the library API).
Status checkSegmentOptions(const SegmentOptions& options);

// The options of `schema` that affect results and differ from their default in `options`, as
// (key, current text) in the schema's order: what `voxseg batch`'s resume hash is made of, so
// a new option is in the hash as soon as it is in the schema, and one left at its default does
// not change the hash of journals written before it existed. (A changed default of an existing
// option therefore needs a new key.)
std::vector<std::pair<std::string, std::string>> resultOptions(
    const SegmentOptions& options,
    const std::vector<SegmentOptionSpec>& schema = segmentOptionSchema());

}  // namespace voxseg::pipeline
