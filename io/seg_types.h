// What a DICOM SEG segment says about itself, shared by io/seg_writer.h and io/seg_reader.h:
// label value in voxseg's label map, SegmentLabel, coded category and type (SNOMED CT by
// default, as model.json gives them) and the recommended display colour (sRGB here; CIELab in
// the file). Plain value types.
#pragma once

#include "core/coded_concept.h"

#include <array>
#include <cstdint>
#include <string>

namespace voxseg::io {

struct SegmentDescription {
    int label_value = 0;  // value in the label map
    std::string label;    // SegmentLabel (LO, at most 64 characters)
    std::string description;
    std::array<uint8_t, 3> color{255, 0, 0};  // sRGB
    CodedConcept category{"91772007", "SCT", "Organ"};
    CodedConcept type{"85756007", "SCT", "Tissue"};
    std::string algorithm_name;  // reader: SegmentAlgorithmName
    // SegmentAlgorithmType: "AUTOMATIC" (empty: the writers' default), "SEMIAUTOMATIC" (an AI
    // result a reader edited) or "MANUAL" (drawn by hand; written without algorithm details).
    std::string algorithm_type;
};

}  // namespace voxseg::io
