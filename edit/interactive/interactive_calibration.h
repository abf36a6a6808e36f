// `voxseg model calibrate` for a promptable (interactive) package (docs/interactive.md, "int8"):
// the int8 activation ranges of its network measured on the inputs it really sees, the windows
// of click sessions, and validated the same way.
//
//   1. the cases are split as for a segmentation package (pipeline/calibration_cases.h); each
//      case is an image and a label map whose every label is a structure to click on;
//   2. on each calibration case, per structure (the largest first, `max_structures` of them),
//      the simulated user (simulated_clicks.h) clicks `1 + corrections` times on the fp32
//      network with AutoZoom on, every network call observed (pipeline/calibration_record.h);
//   3. the record goes into a staged copy of the package; on each held-back structure the fp32
//      session's clicks are replayed on the int8 network, and the two objects after the last
//      click are compared (Dice, voxel agreement: pipeline/calibration_gate.h, one row per case
//      and structure);
//   4. gate met: the copy is signed when a key is given and renamed into place; missed: nothing
//      is written.
// CPU only (the observer and int8 are the cpu backend's). Not thread-safe.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "pipeline/calibrate.h"

#include <filesystem>
#include <string>
#include <vector>

namespace voxseg::edit::interactive {

struct InteractiveCalibrationCase {
    std::string id;      // a pseudonym: recorded in model.json
    std::string image;   // DICOM folder/file or image file
    std::string series;  // index or SeriesInstanceUID; empty: the only one
    std::string labels;  // label map, DICOM SEG or RTSTRUCT on the image: the structures
};

struct InteractiveCalibrateOptions {
    // Ranges, weight bits, 8-bit choices, held-back split, gate, key; segment.threads the CPU
    // threads. The rest of `segment` is not used.
    pipeline::CalibrateOptions calibrate;
    int corrections = 2;     // corrective clicks after the first, per structure
    int max_structures = 3;  // per case, the largest labels (0: every label)
};

Result<pipeline::CalibrateReport> calibrateInteractivePackage(
    const std::filesystem::path& package, const std::vector<InteractiveCalibrationCase>& cases,
    const std::filesystem::path& output, const InteractiveCalibrateOptions& options,
    const Progress& progress = {});

}  // namespace voxseg::edit::interactive
