// JPEG 2000 (Part 1 and, with OpenJPEG >= 2.5, HTJ2K Part 15) decoding of one frame through
// OpenJPEG. DCMTK 3.6.7 has no JPEG 2000 decoder, so io/ brings its own.
//
// Input: one frame's codestream (raw J2K or JP2 file format), fragments already concatenated.
// Output: the single component's samples as OpenJPEG delivers them (already sign-interpreted
// when the codestream says signed), row-major. Internal to io/. Thread-safe: each call uses its
// own OpenJPEG codec and stream.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <span>
#include <string>

namespace voxseg::io::detail {

struct J2kFrameInfo {
    int precision = 0;       // bits per sample in the codestream
    bool is_signed = false;  // codestream's signedness (may differ from PixelRepresentation)
};

// Decodes `codestream` into `out` (rows*columns values). The codestream must hold one component
// of exactly rows x columns, else kCorruptData / kUnsupported naming `subject`.
Status decodeJ2kFrame(std::span<const uint8_t> codestream, int64_t rows, int64_t columns,
                      std::span<int32_t> out, J2kFrameInfo* info, const std::string& subject);

}  // namespace voxseg::io::detail
