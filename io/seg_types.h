// What a DICOM SEG segment or an RTSTRUCT ROI says about itself, shared by the io/ writers and
// readers: the label (core/label_info.h: value in voxseg's label map, SegmentLabel or ROIName as
// its name, the recommended display colour, sRGB here and CIELab in a SEG, the coded category and
// type) with the segment's description and algorithm. Plain value types.
#pragma once

#include "core/label_info.h"

#include <array>
#include <cstdint>
#include <string>

namespace voxseg::io {

// `name` is the SegmentLabel (LO, at most 64 characters) or ROIName.
struct SegmentDescription : LabelInfo {
    std::string description;
    std::string algorithm_name;  // reader: SegmentAlgorithmName
    // SegmentAlgorithmType: "AUTOMATIC" (empty: the writers' default), "SEMIAUTOMATIC" (an AI
    // result a reader edited) or "MANUAL" (drawn by hand; written without algorithm details).
    std::string algorithm_type;
};

}  // namespace voxseg::io
