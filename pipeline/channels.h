// A study's input channels for a multi-channel model (issue 15 part 4: brain tumour models take
// T1, T1c, T2 and FLAIR as channels). Each model.json channel takes one series: the one named
// explicitly (`--channel NAME=VALUE`, batch manifest columns `channel:NAME`), else the one series
// of the study that its rules match (modality, SeriesDescription regex, ImageType value, echo
// time range; engine::SeriesMatch). All channels must share the first channel's frame of
// reference; a channel on another grid is resampled onto the first channel's grid (trilinear,
// 0 outside), with the reason logged and kept in StudyInput::channel_notes. A channel that cannot
// be found is an error naming it and what was looked for.
//
// VALUE is a path (an image file, or a DICOM file/folder holding one series), or, when no such
// path exists, a series index or SeriesInstanceUID of the study given as the input.
// Plain functions; reentrant.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "engine/model/model_package.h"
#include "io/dicom_series.h"
#include "pipeline/segment.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

struct ChannelAssignment {
    std::string name;   // a model.json channel name
    std::string value;  // a path, or a series index/UID of the main input
};

// "NAME=VALUE" strings (`--channel`, repeatable) -> assignments; a malformed entry or a name
// given twice is an error.
Result<std::vector<ChannelAssignment>> parseChannelAssignments(
    const std::vector<std::string>& entries);

// Whether `series` satisfies `channel`'s modality and match rules, and the rules in words
// ("modality MR, SeriesDescription ~ /t2/i, echo time 50..200 ms") for messages.
bool seriesMatchesChannel(const io::SeriesCandidate& series, const engine::ChannelSpec& channel);
std::string describeChannelRules(const engine::ChannelSpec& channel);

// Loads every channel of `model` for the study at `path` (`selector`: --series, which picks the
// first channel when it is not assigned explicitly). One-channel models without assignments load
// exactly as loadStudy does. `candidates_out`: the input's series when it is DICOM (for listing
// them after an ambiguity).
Result<StudyInput> loadStudyChannels(const std::string& path, const std::string& selector,
                                     const std::vector<ChannelAssignment>& assignments,
                                     const engine::ModelPackage& model,
                                     const io::DicomLoadOptions& dicom,
                                     const Progress& progress = {},
                                     std::vector<io::SeriesCandidate>* candidates_out = nullptr);

// `channel` resampled onto `grid` (trilinear, 0 outside; float32), or an error when the two do not
// overlap at all. Exposed for tests.
Result<Volume> resampleChannelOnto(const Volume& channel, const Geometry& grid);

}  // namespace voxseg::pipeline
