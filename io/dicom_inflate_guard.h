// Deflate bombs (issue 19 part 3): DCMTK inflates a Deflated Explicit VR Little Endian file into
// memory while it parses, whatever the header claims, so a 1 MB file can take gigabytes. This
// check streams the inflation through a fixed buffer, counting, before DCMTK sees the file.
#pragma once

#include "core/limits.h"
#include "core/status.h"

#include <cstdint>
#include <string>

namespace voxseg::io {

// Ok for files that are not deflated (or too short to tell: the DICOM reader reports those).
// For a deflated file, an error naming the file, its size, the inflated size reached and the
// limit when the dataset inflates to more than `limit` bytes, or when the deflate stream is
// damaged. Reads the whole file once (about 1 s per GB inflated).
Status checkInflatedSize(const std::string& path,
                         uint64_t limit = readLimits().inflated_bytes_per_file);

}  // namespace voxseg::io
