// Opening a saved segmentation with everything a reviewer gave its labels, for the viewer and
// `voxseg edit` alike (Qt-free): the voxels through pipeline::readSegmentationFile (label map
// image, DICOM SEG or RTSTRUCT on the loaded image's grid), and per label the name, colour,
// coded category and type, review status and algorithm type (edit provenance), as one list of
// SegmentMeta.
//
// Where they come from: a SEG's segments and an RTSTRUCT's ROIs of any writer give what they
// hold (SegmentLabel/ROIName, RecommendedDisplayCIELabValue/ROIDisplayColor, the codes,
// SegmentAlgorithmType/ROIGenerationAlgorithm, and the status voxseg writes into
// SegmentDescription/ROIDescription: "<name>; review: <status>"). The sidecar the viewer writes
// beside a save (edit/segment_meta.h: `x.nii.gz` -> `x.json`, `x.dcm` -> `x.review.json`) gives
// the rest: everything for a label map, and for a SEG or RTSTRUCT whose segments it describes
// (each segment has a sidecar entry of its name) the label values (a binary SEG
// numbers its segments 1..N; the voxels are renumbered back), full names (SegmentLabel and
// ROIName hold 64 characters), the exact sRGB colour (a SEG stores CIELab: a colour within 2 per
// channel is the sidecar's), an RTSTRUCT's category (it has none), code meanings beyond 64
// characters, the algorithm type when the sidecar states one (voxseg's RTSTRUCT writer always says
// AUTOMATIC), the status where the file states none, and labels without voxels (not written to the
// file). What the file states otherwise wins. A sidecar of another format (a BIDS `.json`) is
// ignored; a broken or non-matching voxseg sidecar is ignored with a warning. Reentrant.
#pragma once

#include "core/geometry.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "edit/segment_meta.h"
#include "io/dicom_series.h"
#include "io/seg_types.h"

#include <string>
#include <vector>

namespace voxseg::edit {

struct LoadedSegmentation {
    Volume label_map;  // on the grid asked for
    // Ascending value; empty when nothing describes the labels (a plain label map).
    std::vector<SegmentMeta> segments;
    // The same labels as the SEG/RTSTRUCT writers take them (toSegmentDescription, with the
    // file's SegmentAlgorithmName kept).
    std::vector<io::SegmentDescription> descriptions;
    std::string kind;                   // "label map", "DICOM SEG" or "RTSTRUCT"
    std::string sidecar;                // the sidecar used, "" when none
    int64_t overlapping_voxels = 0;     // claimed by several segments (higher wins)
    std::vector<std::string> warnings;  // the reader's, and why a sidecar was not used
};

// `grid`: the loaded image's geometry; `series`: the DICOM series it came from (null for an
// image file; an RTSTRUCT needs it).
Result<LoadedSegmentation> loadSegmentation(const std::string& path, const Geometry& grid,
                                            const io::SeriesCandidate* series,
                                            const Progress& progress = {});

// The merge loadSegmentation does, on values: `from_file` as read from a SEG (`rtstruct`
// false) or RTSTRUCT, `sidecar` as read beside it. Each file segment takes the first unused
// sidecar entry of its name (of its value when the name comes twice). Returns the merged list
// (ascending value) and, per file segment, the value it takes (`values[i]` for `from_file[i]`);
// an error naming the first file segment the sidecar does not describe, or a value it gives
// twice.
struct SidecarMerge {
    std::vector<SegmentMeta> segments;
    std::vector<int> values;
};
Result<SidecarMerge> mergeSidecar(const std::vector<io::SegmentDescription>& from_file,
                                  const std::vector<SegmentMeta>& sidecar, bool rtstruct);

}  // namespace voxseg::edit
