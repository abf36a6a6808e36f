// Saving an edited segmentation through the existing writers, for `voxseg edit` and the viewer
// alike: a label map file (io::writeImage: .nii.gz, .nii, .nrrd, .mha) or a DICOM SEG on the
// source series' images (pipeline::writeDicomSegmentation; a DICOM source only). The file kind
// follows the extension. Reentrant.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "edit/label_editor.h"
#include "io/dicom_series.h"
#include "io/seg_types.h"
#include "io/seg_writer.h"

#include <string>
#include <vector>

namespace voxseg::edit {

enum class OutputKind { kLabelMap, kDicomSeg };

// From the extension: .dcm -> DICOM SEG, an image extension -> label map, else an error naming
// the path and the choices.
Result<OutputKind> outputKindFor(const std::string& path);

struct SaveOptions {
    io::SegType seg_type = io::SegType::kBinary;
    std::string algorithm_name = "voxseg edit";
    std::string algorithm_version = "0";
    // DICOM SEG: a new series (new SeriesInstanceUID) with this description.
    std::string series_description = "edited segmentation";
    // What the edits changed (compareLabelMaps): each segment's SegmentAlgorithmType follows
    // LabelChange::algorithmTypeAfter() of the one it came with (kept when unchanged, else
    // AUTOMATIC; SEMIAUTOMATIC edited; MANUAL new or drawn by hand before).
    std::vector<LabelChange> changes;
    int threads = 0;
};

// `label_map` on the grid `series` was loaded to (or the image file's grid); `series` null for
// an image-file source (then only a label map can be written). `segments` describes labels (a
// SEG's or RTSTRUCT's own descriptions); others get generic ones.
Status saveEditedSegmentation(const Volume& label_map, const std::string& path,
                              const io::SeriesCandidate* series,
                              const std::vector<io::SegmentDescription>& segments,
                              const SaveOptions& options = {});

}  // namespace voxseg::edit
