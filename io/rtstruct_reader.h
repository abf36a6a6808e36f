// Reading a DICOM RT Structure Set (RTSTRUCT) back into a label map on the images it outlines.
//
// The caller gives the referenced image series (a SeriesCandidate from scanDicom()). Each
// CLOSED_PLANAR contour goes to one acquired image plane of that series: the image its
// ContourImageSequence references (SOP instance, and frame for multi-frame images) when that
// image is in the series and the contour lies on it, else the plane its points lie on (distance
// along the image normal within the tolerance). The contours of one ROI on one plane are scan
// converted together with the EVEN-ODD rule at pixel centres (io/contours.h), so holes written
// as separate contours (voxseg, Eclipse-style writers) come out as holes. ROIs are painted in
// ascending ROI number: where ROIs overlap the higher number wins and the overlap is counted.
//
// The result is an AcquiredLabels (columns x rows x images, one plane per source slice, uint8
// when every label value fits, else uint16) and, when asked, the same on a regular grid through
// io::labelsOnGrid (e.g. the grid loadSeries() gives for the series).
//
// Errors (a Status naming the file): not DICOM, truncated, not an RTSTRUCT, a different
// referenced series or frame of reference than the one given (both UIDs named; a differing
// frame of reference alone is only a warning when the RTSTRUCT names the given series, as some
// writers mint a new one). Warnings, each naming the ROI, once per ROI and reason (logged and
// returned): contours on no image of the series (with their positions along the normal and the
// nearest image's distance), open, POINT or degenerate contours (fewer than 3 points, zero
// area), contours that reference an image they do not lie on, ROIs of another frame of
// reference, contours of ROIs the structure set does not declare. Patient data is not read out.
// Thread safety: reentrant; planes are scan converted on `threads` threads.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/seg_types.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::io {

struct RtStructReadOptions {
    // Also map the labels onto this grid (io::labelsOnGrid), e.g. the loaded series' geometry.
    std::optional<Geometry> grid;
    // Label value per ROIName; ROIs not listed get their ROI number (1..65535).
    std::map<std::string, int> label_values;
    // How far (mm, along the image normal) a contour may lie from an image plane and still be
    // placed on it. 0: a quarter of the slice thickness, at least 0.01 mm (0.5 mm for a series
    // of one image).
    double plane_tolerance_mm = 0;
    int threads = 0;  // 0 = all cores
};

struct RtRoi {
    // value = value in the label maps, name = ROIName, color = ROIDisplayColor,
    // description = ROIDescription; type = the first RTROIIdentificationCode when present;
    // algorithm_type = ROIGenerationAlgorithm when AUTOMATIC, SEMIAUTOMATIC or MANUAL.
    SegmentDescription description;
    int roi_number = 0;
    std::string interpreted_type;      // RTROIInterpretedType
    std::string generation_algorithm;  // ROIGenerationAlgorithm
    int contours = 0;                  // contour items in the file
    int contours_placed = 0;           // scan converted onto an image plane
    int64_t voxels = 0;                // acquired pixels carrying this ROI's label in the result
    std::vector<std::string> warnings;
};

struct RtStructReadResult {
    std::vector<RtRoi> rois;            // ascending ROI number
    AcquiredLabels acquired;            // on the referenced series' images
    std::optional<Volume> grid_labels;  // when RtStructReadOptions::grid was given
    std::string structure_set_label;
    std::string frame_of_reference_uid;  // as the RTSTRUCT states it
    std::vector<std::string> referenced_series_uids;
    int64_t overlapping_voxels = 0;     // pixels claimed by more than one ROI (extra claims)
    std::vector<std::string> warnings;  // every warning (also in the ROIs' own lists)
};

// Whether `path` is a DICOM file of the RT Structure Set storage class (reads its header only;
// false for anything unreadable).
bool isRtStruct(const std::string& path);

Result<RtStructReadResult> readRtStruct(const std::string& path, const SeriesCandidate& referenced,
                                        const RtStructReadOptions& options = {});

}  // namespace voxseg::io
