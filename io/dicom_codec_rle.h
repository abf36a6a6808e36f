// DICOM RLE Lossless (PS3.5 Annex G) decoding of one monochrome frame.
//
// voxseg decodes RLE itself instead of using DCMTK's DcmRLEDecoder: DCMTK 3.6.7 trusts the segment
// offsets of the RLE header and reads past the fragment on damaged input (found by
// tests/io/fuzz_dicom_pixels.cpp). This decoder checks every offset and run against the buffers.
// Internal to io/; pure function, thread-safe.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <span>
#include <string>

namespace voxseg::io::detail {

// Decodes `data` (one frame's fragments, concatenated) into `out`: pixels samples of
// `bytes_per_sample` bytes (1, 2 or 4), each reassembled from its byte planes into the low
// bits of a uint32 exactly as stored uncompressed. kCorruptData naming `subject` on any
// inconsistency.
Status decodeRleFrame(std::span<const uint8_t> data, int64_t pixels, int bytes_per_sample,
                      std::span<uint32_t> out, const std::string& subject);

}  // namespace voxseg::io::detail
