// A MetaImage (.mha/.mhd) header checked by voxseg's own bounded parser before ITK's MetaIO
// reads it. MetaIO 5.2 copies header fields into fixed buffers (a key of 255+ characters
// overflowed its 255-byte field name: a crash found by fuzz_image_mha), sizes arrays by NDims
// (10 slots) and multiplies DimSize in int64 unchecked; so a header is accepted only when every
// key line is well formed and within MetaIO's buffers, NDims is 1-4, the arrays hold NDims
// finite numbers, the element type is a scalar one and the data holds what DimSize claims.
#pragma once

#include "core/status.h"

#include <string>

namespace voxseg::io {

// Ok when ITK may read the header at `path`; kCorruptData (or kUnsupported for valid forms
// voxseg does not read: multi-file ElementDataFile lists, vector element types) naming the
// file, the line and the field otherwise.
Status checkMetaImageHeader(const std::string& path);

// The same, before ITK allocates the image: true when the data is compressed (CompressedData =
// True), which --max-inflated-bytes then bounds. (checkMetaImageHeader already refuses raw data
// shorter than DimSize claims and compressed data too short to inflate to it: deflate's 1032:1.)
Result<bool> checkMetaImageClaim(const std::string& path);

// The same, and compressed data (CompressedData = True) inflated to check that it is intact and
// holds what DimSize claims: readImage runs it beside ITK's read (it costs a pass over the data).
Status checkMetaImageData(const std::string& path);

}  // namespace voxseg::io
