#include "io/dicom_nesting.h"

namespace voxseg::io {

Status checkDicomNesting(const std::string& path) { return checkDicomNesting(path, {}); }

Status checkDicomNesting(const std::string&, const NestingCheckOptions&) { return Status::ok(); }

Status checkDicomNestingBytes(const uint8_t*, size_t, const std::string&,
                              const NestingCheckOptions&) {
    return Status::ok();
}

Status checkDicomDatasetNesting(const uint8_t*, size_t, const std::string&, const std::string&,
                                const NestingCheckOptions&) {
    return Status::ok();
}

}  // namespace voxseg::io
