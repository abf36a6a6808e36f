// One label of a segmentation as every layer describes it: value, name, display colour and the
// coded category and type (with an optional type modifier) a DICOM SEG writes (SNOMED CT, DICOM CID
// 7150/7151). The model package reads it from model.json, the pipeline names and colours statistics
// and previews with it, the SEG and RTSTRUCT writers write it, the label sidecar keeps it and the
// viewer shows it; richer descriptions (io::SegmentDescription, edit::SegmentMeta, the viewer's
// rows) extend it. Plain value type.
#pragma once

#include "core/coded_concept.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace voxseg {

// The codes of a label that states none (model.json without "category"/"type"): category
// "Organ", type "Tissue".
inline CodedConcept defaultLabelCategory() { return {"91772007", "SCT", "Organ"}; }
inline CodedConcept defaultLabelType() { return {"85756007", "SCT", "Tissue"}; }

struct LabelInfo {
    int value = 0;  // value in the label map; 0 is background
    std::string name;
    std::array<uint8_t, 3> color{255, 0, 0};  // sRGB
    CodedConcept category = defaultLabelCategory();
    CodedConcept type = defaultLabelType();
    // SegmentedPropertyTypeModifierCodeSequence inside the type, e.g. laterality (SNOMED CT
    // 7771000 "Left"), as TotalSegmentator's DICOM writer codes kidney_left.
    std::optional<CodedConcept> type_modifier;
    bool operator==(const LabelInfo&) const = default;
};

// A label nothing describes (drawn by hand, or absent from the model): "label <value>", generic
// tissue as category and type.
inline LabelInfo undescribedLabel(int value) {
    LabelInfo l;
    l.value = value;
    l.name = "label " + std::to_string(value);
    l.category = defaultLabelType();  // "Tissue" is also a category of CID 7150
    return l;
}

}  // namespace voxseg
