// Writing a label map as a DICOM Segmentation (SEG) object with DCMTK's dcmseg: BINARY, one
// segment per label present, SegmentAlgorithmType AUTOMATIC with the algorithm's name and
// version (Segmentation Algorithm Identification), coded category/type and CIELab colour per
// segment; patient, study and frame of reference taken over from the source series; references
// to the source series and instances (ReferencedSeriesSequence, and a per-frame
// DerivationImageSequence/SourceImageSequence when every frame lies on a source slice); shared
// plane orientation and pixel measures, per-frame plane position; empty frames omitted.
//
// The label map must be on the grid the source series was loaded to (io/dicom_series.h). A label
// map without a source DICOM series cannot be written as SEG (error, with what to do).
// Written through AtomicFile. Patient data is copied into the file, never logged.
// Thread safety: reentrant.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/seg_types.h"

#include <string>
#include <vector>

namespace voxseg::io {

enum class SegType {
    kBinary,    // Segmentation IOD, BINARY: one bit-packed frame per segment and source slice
    kLabelMap,  // Label Map Segmentation IOD (2024): one frame per source slice, label values
};

// "binary" | "labelmap" (the --seg-type values); anything else is an error naming the choices.
Result<SegType> parseSegType(const std::string& name);

struct SegWriteOptions {
    SegType type = SegType::kBinary;
    std::string algorithm_name = "voxseg";
    std::string algorithm_version = "0";  // model version (model.json "version")
    std::string series_description = "voxseg segmentation";
    int series_number = 300;
    std::string content_label = "VOXSEG";  // CS: upper case, digits, space, underscore
    std::string content_description = "Automatic segmentation";
    std::string software_version = "voxseg";
};

struct SegWriteReport {
    int segments = 0;
    int frames = 0;
    bool per_frame_references = false;  // every frame names its source image
    bool mapped_to_acquired = false;    // the label map was on a resampled grid
    std::vector<int> empty_labels;      // described, but no voxel: no segment written
};

// `segments` describes label values; labels present in the map but not described get a generic
// "label N" segment (category Tissue, type Tissue) and a warning. An empty label map is an error
// (a SEG needs at least one frame).
Result<SegWriteReport> writeDicomSeg(const AcquiredLabels& labels, const SeriesCandidate& source,
                                     const std::vector<SegmentDescription>& segments,
                                     const SegWriteOptions& options, const std::string& path);

// `label_map` on the grid `source` was loaded to; mapped onto the acquired images first.
Result<SegWriteReport> writeDicomSeg(const Volume& label_map, const SeriesCandidate& source,
                                     const std::vector<SegmentDescription>& segments,
                                     const SegWriteOptions& options, const std::string& path);

}  // namespace voxseg::io
