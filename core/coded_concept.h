// A coded concept (code value, coding scheme designator, code meaning) as DICOM uses them for
// segment categories and types: model.json states them, DICOM SEG writes and reads them.
// Plain value type.
#pragma once

#include <string>

namespace voxseg {

struct CodedConcept {
    std::string code;            // e.g. "10200004"
    std::string scheme = "SCT";  // coding scheme designator: "SCT", "DCM", ...
    std::string meaning;         // e.g. "Liver"
    bool operator==(const CodedConcept&) const = default;
};

}  // namespace voxseg
