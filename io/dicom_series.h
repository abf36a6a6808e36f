// Finding DICOM series in folders and building volumes from them (DCMTK).
//
// scanDicom() reads headers only (no pixel data), in parallel, recognising DICOM by content,
// groups files into series and splits each series into stackable volumes (orientation, matrix
// size, echo/temporal position, image type, acquisition), stating a reason for every split and
// every skipped file. loadSeries() then decodes one candidate into a Volume with exact LPS
// geometry, resampling gantry-tilted or unevenly spaced stacks to a regular grid unless asked to
// refuse. Thread safety: functions are reentrant; the results are plain values.
#pragma once

#include "core/geometry.h"
#include "core/limits.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"

#include <string>
#include <vector>

namespace voxseg::io {

// Patient identifiers: shown by the CLI only with --show-phi, never logged.
struct PatientInfo {
    std::string name;
    std::string id;
    std::string birth_date;
};

// One slice (a file, or one frame of a multi-frame file) as the scanner placed it.
struct SliceRef {
    std::string path;
    int frame = 0;           // frame index inside a multi-frame file
    Vec3 position{0, 0, 0};  // ImagePositionPatient (mm, LPS)
    int instance_number = 0;
    double slope = 1;                // RescaleSlope of this slice (may vary per slice)
    double intercept = 0;            // RescaleIntercept
    double philips_scale_slope = 0;  // Philips private MRScaleSlope; 0 when absent
    int tile = -1;                   // Siemens mosaic tile index, -1 when not a mosaic
};

// One stackable volume found by scanDicom().
struct SeriesCandidate {
    int index = 0;  // 0-based, stable for the same input
    std::string series_uid;
    std::string study_uid;
    std::string frame_of_reference_uid;
    std::string modality;
    std::string description;
    std::string sop_class_uid;
    int series_number = 0;
    PatientInfo patient;
    Geometry geometry;             // of the volume loadSeries() will return (before resampling)
    std::vector<SliceRef> slices;  // sorted along the slice normal
    int num_files = 0;
    std::string split_reason;           // why this volume is separate from others of its series
    std::vector<std::string> warnings;  // gaps, duplicates, tilt, uneven spacing, ...
    bool tilted = false;
    bool uneven_spacing = false;
    bool has_gaps = false;             // missing slices (a step > 1.5x the median spacing)
    double tilt_degrees = 0;           // angle between the slice normal and the stacking axis
    bool has_patient_geometry = true;  // false: no IOP/IPP, geometry is a plain index grid
    std::string image_type;
    double echo_time = 0;         // ms; 0 when absent
    int mosaic_tiles_across = 0;  // Siemens mosaic: tiles per row; 0 otherwise
};

struct SkippedFile {
    std::string path;
    std::string reason;  // "not DICOM (no DICM prefix, no parseable dataset)", "DICOMDIR", "SR"...
};

struct DicomScanResult {
    std::vector<SeriesCandidate> series;
    std::vector<SkippedFile> skipped;
};

struct DicomScanOptions {
    int threads = 0;  // 0 = all cores
    // More files than this under the inputs is refused while listing (core/limits.h).
    int64_t max_files = readLimits().files_per_scan;  // --max-files
};

// `inputs`: folders (scanned recursively), files, or DICOMDIR files. An input that does not
// exist or holds no image series is an error naming it.
Result<DicomScanResult> scanDicom(const std::vector<std::string>& inputs,
                                  const DicomScanOptions& options = {},
                                  const Progress& progress = {});

enum class IrregularPolicy {
    kResample,  // resample to a regular orthogonal grid (dcm2niix), with a warning
    kRefuse,    // fail with a message that names the series and the problem
};

struct DicomLoadOptions {
    int64_t max_voxels = kDefaultMaxVoxels;  // core/limits.h: a series claiming more is refused
    IrregularPolicy tilt = IrregularPolicy::kResample;
    IrregularPolicy uneven_spacing = IrregularPolicy::kResample;
    bool allow_gaps = true;  // missing slices: warn (true) or fail (false)
    // Philips MR: divide by the private MRScaleSlope (2005,100E) to get "precise" floating
    // point values (dcm2niix -p y) instead of the displayed RescaleSlope/Intercept values.
    bool philips_precise = false;
    int threads = 0;
};

// Decodes one candidate (through DicomPixelReader, so every transfer syntax works). Pixels:
// RescaleSlope/Intercept applied per slice (CT in HU); int16 when values stay integral and in
// range, else float32. Tilted, unevenly spaced or gapped stacks are resampled (linear) onto a
// regular orthogonal grid whose third axis is the stacking direction, unless refused by
// `options` (interpolated values are rounded back to int16 when the input was integral); the
// volume's warnings say what was done.
Result<Volume> loadSeries(const SeriesCandidate& candidate, const DicomLoadOptions& options = {},
                          const Progress& progress = {});

// Picks a candidate by 0-based index or by SeriesInstanceUID; with `selector` empty, succeeds
// only when exactly one candidate exists (else kAmbiguous listing them).
Result<const SeriesCandidate*> selectSeries(const DicomScanResult& scan,
                                            const std::string& selector);

}  // namespace voxseg::io
