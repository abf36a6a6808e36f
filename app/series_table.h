// The rows `voxseg info` prints (and `voxseg convert` lists when the choice is ambiguous): one per
// volume found, from a DICOM scan or an image file, as a text table or JSON.
//
// Patient identifiers are carried only when the caller asked for them (--show-phi); they are
// printed to stdout, never logged. The description is free text: without --show-phi the
// patient's name in it reads [PHI] (core/free_text.h). Plain values; not thread-safe.
#pragma once

#include "core/geometry.h"
#include "io/dicom_series.h"
#include "io/image_io.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::app {

struct VolumeRow {
    int index = 0;       // --series INDEX for DICOM candidates; -1 for image files
    std::string source;  // image file path, or "" for DICOM
    std::string format;  // "DICOM", "NIfTI (gzip)", ...
    std::string series_uid;
    std::string modality;
    std::string description;  // SeriesDescription, scrubbed unless show_phi (core/free_text.h)
    std::string pixel_type;   // image files only (DICOM: decided when loading)
    Geometry geometry;
    int num_files = 0;
    std::string split_reason;
    std::vector<std::string> warnings;
    std::optional<io::PatientInfo> patient;  // only with --show-phi
};

struct InfoReport {
    std::vector<VolumeRow> rows;
    std::vector<io::SkippedFile> skipped;
};

VolumeRow rowFromCandidate(const io::SeriesCandidate& candidate, bool show_phi);
VolumeRow rowFromImage(const std::string& path, const io::ImageHeader& header);

// Human-readable table (one line per volume, then indented notes), to `out`.
void printTable(const InfoReport& report, std::FILE* out);
// "N candidate volumes in INPUT; choose one with --series INDEX or --series UID:" + the table,
// on stderr (convert and segment, when the input holds several volumes and none was chosen);
// descriptions scrubbed (`voxseg info --show-phi` prints them as they are).
void printCandidates(const std::vector<io::SeriesCandidate>& candidates, const std::string& input);
nlohmann::json toJson(const InfoReport& report);

}  // namespace voxseg::app
