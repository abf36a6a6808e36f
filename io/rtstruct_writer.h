// Writing a label map as a DICOM RT Structure Set (RTSTRUCT): one ROI per label present, its
// outlines as CLOSED_PLANAR contours on every source image the label touches.
//
// Input is an AcquiredLabels (io/acquired_labels.h): the labels on the acquired images of the
// source series, so that every contour lies exactly in one source image plane (tilted or gapped
// series included) and references that image (ContourImageSequence: SOP class/instance, and
// ReferencedFrameNumber for multi-frame sources). Contours come from io/contours.h: vertices on
// pixel edges (midpoints between an inside and an outside pixel centre), the label 8-connected,
// outer boundaries counter-clockwise and holes clockwise about the image normal
// (row_dir x col_dir). Holes are separate contours of the same ROI and the ROI is meant to be
// read with the EVEN-ODD rule (a point is inside when it is inside an odd number of the ROI's
// contours on that plane), as Eclipse-style readers, dicompyler and io/rtstruct_reader.h do;
// plastimatch needs `--xor-contours` for it (by default it ORs a plane's contours and fills
// holes: Dice 0.82 instead of 1.0 on a hollow test structure). Coordinates: patient space, LPS,
// mm, 4 decimals.
//
// ROI number = label value; ROIName = the description's label (LO, 64 characters);
// ROIDisplayColor = its sRGB colour; ROIGenerationAlgorithm AUTOMATIC; RTROIInterpretedType from
// the options (ORGAN by default), ROIInterpreter empty; the description's property type code as
// RTROIIdentificationCodeSequence. Labels present but not described get "label N" (warning);
// described labels without voxels get no ROI (warning). Patient, study and frame of reference
// are taken over from the source series; new series and SOP instance UIDs. Explicit VR Little
// Endian, or Implicit VR when a contour holds more than the 64 KiB an explicit DS may.
//
// Written through AtomicFile (temporary file, then rename). Patient data is copied into the
// file, never logged. Thread safety: reentrant; contour extraction runs on `threads` threads.
#pragma once

#include "core/status.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/seg_types.h"

#include <string>
#include <vector>

namespace voxseg::io {

struct RtStructWriteOptions {
    std::string structure_set_label = "VOXSEG";  // SH: at most 16 characters
    std::string structure_set_name = "voxseg structures";
    std::string series_description = "voxseg structures";
    int series_number = 301;
    std::string algorithm_name = "voxseg";  // ROIGenerationDescription
    std::string software_version = "voxseg";
    std::string interpreted_type = "ORGAN";  // RTROIInterpretedType of every ROI
    int threads = 0;                         // contour extraction; 0 = all cores
};

struct RtStructWriteReport {
    int rois = 0;
    int64_t contours = 0;
    int64_t points = 0;
    std::vector<int> empty_labels;  // described, but no voxel: no ROI written
    bool implicit_vr = false;       // a contour too long for Explicit VR
};

// An error when the label map does not match the planes, the source has no frame of reference,
// no label is present, a source header cannot be read, or the file cannot be written.
Result<RtStructWriteReport> writeRtStruct(const AcquiredLabels& acquired,
                                          const SeriesCandidate& source,
                                          const std::vector<SegmentDescription>& rois,
                                          const RtStructWriteOptions& options,
                                          const std::string& path);

// The DICOM instance behind one source slice, read from its header (no pixel data).
struct SourceImageRef {
    std::string sop_class_uid;
    std::string sop_instance_uid;
    int frame = 0;             // 0-based frame in the file
    bool multi_frame = false;  // the file holds more than one frame
};

// One entry per slice, in order; each file is read once. Errors name the unreadable file.
Result<std::vector<SourceImageRef>> readSourceImageRefs(const std::vector<SliceRef>& slices);

}  // namespace voxseg::io
