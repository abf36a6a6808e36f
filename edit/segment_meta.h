// What a reviewer knows about each segment beyond its voxels: name, colour, coded category and
// type (SNOMED CT, DICOM CID 7150/7151), and the review status (not reviewed, accepted,
// corrected, rejected). Written as the JSON sidecar of a saved label map (`x.nii.gz` ->
// `x.json`), beside a saved DICOM SEG (`x.dcm` -> `x.review.json`) and into the viewer's crash
// recovery folder; format in docs/viewer-editing.md ("Saving"). Plain value types and
// functions; reentrant.
#pragma once

#include "core/label_info.h"
#include "core/status.h"
#include "io/seg_types.h"

#include <optional>
#include <string>
#include <vector>

namespace voxseg::edit {

enum class ReviewStatus { kNotReviewed, kAccepted, kCorrected, kRejected };
const char* reviewStatusName(ReviewStatus status);  // "not reviewed", "accepted", ...
// Parses a name of reviewStatusName (also "not_reviewed"); error naming the choices.
Result<ReviewStatus> parseReviewStatus(const std::string& name);

// The label (value, name, colour, codes) and what the review added.
struct SegmentMeta : LabelInfo {
    ReviewStatus status = ReviewStatus::kNotReviewed;
    // SegmentAlgorithmType as saved ("AUTOMATIC", "SEMIAUTOMATIC", "MANUAL"); empty: not saved.
    std::string algorithm_type;
    bool operator==(const SegmentMeta&) const = default;
};

// The SEG description of a segment: SegmentLabel = name (64 characters at most), the codes,
// the colour and SegmentDescription "<name>; review: <status>" so a PACS shows the status (64
// characters at most: a long name is cut there, the status never).
io::SegmentDescription toSegmentDescription(const SegmentMeta& meta);
// The status a description written by toSegmentDescription states ("...; review: accepted"),
// or nothing when it states none (another writer's description, or none at all).
std::optional<ReviewStatus> reviewStatusInDescription(const std::string& description);
// What a SEG segment or RTSTRUCT ROI of any writer says, as a SegmentMeta: the label part as
// read, the status from the description (else not reviewed), SegmentAlgorithmType (or an
// RTSTRUCT's ROIGenerationAlgorithm) when it is AUTOMATIC, SEMIAUTOMATIC or MANUAL.
SegmentMeta fromSegmentDescription(const io::SegmentDescription& description);

// {"format": "voxseg-labels", "version": 1, "segments": [{"value", "name", "color" [r, g, b],
//  "category" {"code", "scheme", "meaning"}, "type" {...}, "review_status", "algorithm_type"}]}
std::string segmentsToJson(const std::vector<SegmentMeta>& segments);
// Strict: an unknown format, a missing key or a bad value is an error naming it.
Result<std::vector<SegmentMeta>> segmentsFromJson(const std::string& text);
Status writeSegmentsFile(const std::vector<SegmentMeta>& segments, const std::string& path);
Result<std::vector<SegmentMeta>> readSegmentsFile(const std::string& path);

// Where the sidecar of a saved segmentation goes: label maps `x.nii.gz`/`x.nrrd`/... ->
// `x.json`; a DICOM SEG or RTSTRUCT `x.dcm` -> `x.review.json`.
std::string sidecarPath(const std::string& output_path);

}  // namespace voxseg::edit
