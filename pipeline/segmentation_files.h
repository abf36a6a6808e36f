// A segmentation as files, for the viewer and the CLI alike (Qt-free): reading a label map
// image, a DICOM SEG or an RTSTRUCT onto the grid of the image it belongs to, and writing the
// DICOM forms (SEG, RTSTRUCT) of a label map on that grid, or one mask file per label. DICOM forms
// lie on the acquired images of the source series (io/acquired_labels.h): for a tilted, unevenly
// spaced or gapped series they are mapped between the acquired images and the loaded grid.
// Reentrant.
#pragma once

#include "core/label_info.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/seg_types.h"
#include "io/seg_writer.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

struct SegmentationFile {
    Volume label_map;                              // on the grid asked for
    std::vector<io::SegmentDescription> segments;  // empty for a plain label map image
    std::string kind;                              // "label map", "DICOM SEG" or "RTSTRUCT"
    int64_t overlapping_voxels = 0;                // claimed by several segments (higher wins)
    std::vector<std::string> warnings;             // e.g. RTSTRUCT contours off every image
};

// `grid`: the loaded image's geometry. `series`: the DICOM series it came from (null for an
// image file); an RTSTRUCT needs it (its contours are placed on the series' images).
Result<SegmentationFile> readSegmentationFile(const std::string& path, const Geometry& grid,
                                              const io::SeriesCandidate* series,
                                              const Progress& progress = {});

enum class DicomSegmentationKind { kSeg, kRtStruct };

struct DicomSegmentationOptions {
    std::string algorithm_name = "voxseg";
    std::string algorithm_version = "0";
    std::string series_description;  // empty: "<algorithm_name> segmentation" / "structures"
    io::SegType seg_type = io::SegType::kBinary;
    int threads = 0;
};

// Labels already on the acquired images (io::labelsOnAcquiredImages), written as SEG or
// RTSTRUCT with the algorithm's name and version in the object.
Status writeDicomSegmentation(DicomSegmentationKind kind, const io::AcquiredLabels& labels,
                              const io::SeriesCandidate& series,
                              const std::vector<io::SegmentDescription>& segments,
                              const DicomSegmentationOptions& options, const std::string& path);

// `label_map` on the grid `series` was loaded to.
Status writeDicomSegmentation(DicomSegmentationKind kind, const Volume& label_map,
                              const io::SeriesCandidate& series,
                              const std::vector<io::SegmentDescription>& segments,
                              const DicomSegmentationOptions& options, const std::string& path);

// Per-label masks in TotalSegmentator's layout: masks/<label name>.nii.gz. A label name is used
// as the file name as it is, so a name that is not a safe file name is refused (never altered,
// which could make two labels share a file): empty, "." or "..", longer than 248 bytes (255
// with ".nii.gz"), holding '/' or '\\' or a control character (below 0x20, or 0x7f), and two
// names that differ only in letter case (one file on case-insensitive file systems).
Status checkMaskFileNames(const std::vector<LabelInfo>& labels);
// "masks/<name>.nii.gz", relative to the output folder.
std::string maskFilePath(const LabelInfo& label);

// One uint8 0/1 image per label (paths[i] for labels[i]), on the label map's exact geometry, also
// for labels with no voxels. One mask is in memory at a time. `progress` is only asked whether
// to cancel (between masks), so it may be shared with jobs running beside this one.
Status writeLabelMasks(const Volume& label_map, const std::vector<LabelInfo>& labels,
                       const std::vector<std::string>& paths, const Progress& progress = {});

}  // namespace voxseg::pipeline
