// Reading a DICOM Segmentation (SEG) object back into a label map with DCMTK's dcmseg: BINARY
// (bit-packed frames, also non-byte-aligned ones) and FRACTIONAL (a voxel belongs to a segment
// when its value is at least half of MaximumFractionalValue). Frames are placed by their
// ImagePositionPatient, either onto a grid the caller gives (the source series' grid: what
// voxseg compares against) or onto a grid derived from the frames (plane orientation, pixel
// measures, positions along the normal). Given the source series, frames are placed on its
// acquired images (each frame on the source slice at its position) and then mapped onto the
// grid (io/acquired_labels.h): the way to read a SEG of a tilted or unevenly spaced series onto
// the grid that series loads to. Overlapping segments: the higher segment wins, and
// the result says so. Label Map Segmentation objects (2024) are read too (io/seg_labelmap.h: one
// frame per image, pixel value = segment number) and placed the same way. Patient data is not
// read out. Thread safety: reentrant.
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

struct SegReadOptions {
    std::optional<Geometry> grid;  // place frames on this grid (else derived from the frames)
    // The series the SEG was made on: frames go onto its acquired images first (then onto
    // `grid` when given, else label_map is the acquired planes). Must outlive the call.
    const SeriesCandidate* source = nullptr;
    // Label value per SegmentLabel; segments not listed get their SegmentNumber.
    std::map<std::string, int> label_values;
};

struct SegReadResult {
    Volume label_map;                          // uint8 when every value fits, else uint16
    std::vector<SegmentDescription> segments;  // value = value used in label_map
    int frames = 0;
    std::string referenced_series_uid;
    std::string frame_of_reference_uid;
    bool fractional = false;
    int64_t overlapping_voxels = 0;          // voxels claimed by more than one segment
    std::optional<AcquiredLabels> acquired;  // with options.source: the labels per source slice
};

Result<SegReadResult> readDicomSeg(const std::string& path, const SegReadOptions& options = {});

}  // namespace voxseg::io
