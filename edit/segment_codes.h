// The coded concepts a segment's category and type are picked from: DICOM CID 7150
// (Segmentation Property Categories, 8 codes) and CID 7151 (Segmentation Property Types, 907
// codes, SNOMED CT mostly), shipped as edit/data/segmentation_codes.json (generated from
// pydicom's copy of DICOM part 16 by edit/data/gen_segmentation_codes.py) and embedded in the
// binary at build time, so no install path is needed. Parsed once on first use; thread-safe.
#pragma once

#include "core/coded_concept.h"

#include <string>
#include <vector>

namespace voxseg::edit {

enum class CodeGroup { kCategory, kType };

// Every code of the group, sorted by meaning.
const std::vector<CodedConcept>& segmentationCodes(CodeGroup group);

// Codes whose meaning or code value contains every word of `query` (case-insensitive, any
// order); meanings starting with the query first, then by meaning. Empty query: all codes.
std::vector<CodedConcept> searchSegmentationCodes(CodeGroup group, const std::string& query,
                                                  size_t max_results = 200);

// The entry of the group with this scheme and code (meaning filled in), or nullptr.
const CodedConcept* findSegmentationCode(CodeGroup group, const std::string& scheme,
                                         const std::string& code);

}  // namespace voxseg::edit
