// Multi-frame DICOM objects: one FrameHeader per frame. Enhanced CT/MR (and other objects with
// functional groups) take geometry, pixel value transformation, stack/temporal/echo position and
// frame type from the Shared and Per-Frame Functional Groups; legacy multi-frame objects without
// them stack frames along the slice normal from ImagePositionPatient with SpacingBetweenSlices.
// Internal to io/. Thread safety: reentrant.
#pragma once

#include "io/dicom_header.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dctk.h>

#include <string>
#include <vector>

namespace voxseg::io {

// Empty result with `error` set when the frames cannot be placed.
std::vector<FrameHeader> expandMultiFrame(DcmDataset* ds, const FrameHeader& base, int num_frames,
                                          std::string& error);

}  // namespace voxseg::io
