// The cases of `voxseg model calibrate` (issue 40, docs/int8.md "Calibration and accuracy"): which
// calibrate the activation ranges and which are held back to measure int8 against fp32. The
// held-back cases are never calibration cases; they are spread evenly over the list (a manifest
// sorted by site or date then gives both parts some of each). Plain functions; thread-safe.
#pragma once

#include "core/status.h"
#include "pipeline/channels.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

struct CalibrationCase {
    std::string id;                           // a pseudonym: recorded in model.json
    std::string input;                        // DICOM folder/file or image file
    std::string series;                       // index or SeriesInstanceUID; empty: the only one
    std::vector<ChannelAssignment> channels;  // multi-channel models
};

// `--held-back`: a count ("2") or a share of the cases ("25%", rounded down, at least 1);
// default 25 % rounded down, at least 2 (10 cases: 8 calibrate, 2 are held back).
struct HeldBackSpec {
    int count = -1;          // >= 1 when given as a count
    double fraction = 0.25;  // used when count < 0
    int min_count = 2;       // the default's floor
};
// "N" (integer >= 1) or "P%" (0 < P < 100); kInvalidArgument naming --held-back otherwise.
Result<HeldBackSpec> parseHeldBack(const std::string& text);

struct CalibrationSplit {
    std::vector<CalibrationCase> calibration;
    std::vector<CalibrationCase> held_back;
};

// Splits `cases` (ids unique: refused otherwise) by `spec`. Refused (kInvalidArgument, saying how
// many cases were given, how many each part needs, and the options that change it) when fewer
// than `min_cases` would be left to calibrate on, or when nothing would be held back.
Result<CalibrationSplit> splitCalibrationCases(const std::vector<CalibrationCase>& cases,
                                               const HeldBackSpec& spec, int min_cases);

}  // namespace voxseg::pipeline
