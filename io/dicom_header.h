// Reading what one DICOM file says about its image frames, from its header only (DCMTK).
//
// readDicomHeaders() recognises DICOM by content (128-byte preamble + "DICM", or a dataset
// without meta header that DCMTK parses and that carries image attributes), stops parsing before
// the pixel data, and returns one FrameHeader per image frame: one for a classic single-frame
// file, one per frame of an enhanced multi-frame object (geometry from the per-frame functional
// groups), one per tile of a Siemens mosaic. Files that are not images (DICOMDIR, SR, RT, SEG,
// presentation states, no pixel data) come back as a skip reason instead. Internal to io/.
// Thread safety: reentrant (one DCMTK object per call). Units: mm, ms, LPS.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "io/dicom_series.h"

#include <limits>
#include <string>
#include <vector>

namespace voxseg::io {

inline constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();

// One image frame (a slice) as its headers describe it.
struct FrameHeader {
    std::string path;
    int frame = 0;  // frame index in the file (0 for single-frame files and mosaics)
    int tile = -1;  // Siemens mosaic tile index, -1 when not a mosaic

    std::string sop_class_uid;
    std::string sop_instance_uid;
    std::string series_uid;
    std::string study_uid;
    std::string frame_of_reference_uid;
    std::string modality;
    std::string description;
    std::string manufacturer;
    std::string image_type;  // values joined with '\'; per-frame FrameType for enhanced objects
    std::string transfer_syntax_uid;
    int series_number = 0;
    int instance_number = 0;
    int acquisition_number = 0;
    PatientInfo patient;

    int rows = 0;  // of the slice (a mosaic tile for mosaics)
    int columns = 0;
    int samples_per_pixel = 1;

    bool has_geometry = false;  // ImagePositionPatient and ImageOrientationPatient present
    Vec3 row_dir{1, 0, 0};      // direction of increasing column index
    Vec3 col_dir{0, 1, 0};      // direction of increasing row index
    Vec3 position{0, 0, 0};     // centre of the first voxel
    double column_spacing = 1;  // mm between columns (PixelSpacing[1])
    double row_spacing = 1;     // mm between rows (PixelSpacing[0])
    bool has_pixel_spacing = false;
    double slice_thickness = kUnset;
    double spacing_between_slices = kUnset;

    double echo_time = kUnset;  // ms
    int echo_number = -1;
    int temporal_position = -1;  // TemporalPositionIdentifier / TemporalPositionIndex
    double trigger_time = kUnset;
    std::string acquisition_time;
    std::string stack_id;  // enhanced objects
    int in_stack_position = -1;

    double slope = 1;
    double intercept = 0;
    double philips_scale_slope = kUnset;  // (2005,100E) MRScaleSlope

    int mosaic_tiles_across = 0;  // tiles per mosaic row; 0 when not a mosaic
};

// Frames of one file, or why it was skipped (frames empty, skip_reason set).
struct FileHeaders {
    std::vector<FrameHeader> frames;
    std::string skip_reason;
};

// Fails only for I/O errors on a readable path; "not DICOM" and non-image objects are skips.
FileHeaders readDicomHeaders(const std::string& path);

// True when the first bytes look like DICOM (preamble + DICM, or a plausible first tag of a
// dataset without meta header). Cheap: reads at most 132 bytes.
bool looksLikeDicom(const std::string& path);

// Paths of the image files a DICOMDIR references (resolved against its folder), or an error.
Result<std::vector<std::string>> readDicomdir(const std::string& path);

}  // namespace voxseg::io
