// Which fragments of an encapsulated Pixel Data element hold which frame (DICOM PS3.5 A.4).
//
// A frame may span any number of fragments; the Basic Offset Table (or the Extended Offset Table)
// says where each frame starts, and when both are empty the frame starts are found by the
// codec's start marker (JPEG SOI, JPEG 2000 SOC or JP2 signature). Internal to io/; DCMTK-free
// so it can be tested on synthetic layouts. Pure functions, thread-safe.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace voxseg::io::detail {

// What a fragment looks like to the mapper: its value length and its first bytes.
struct FragmentInfo {
    uint64_t length = 0;
    uint8_t head[12] = {};
    int head_size = 0;  // valid bytes in head (min(12, length))
};

// Fragments [first, first + count) (0-based, not counting the offset table item) form a frame.
struct FrameFragments {
    size_t first = 0;
    size_t count = 0;
};

enum class StartMarker {
    kNone,      // the codec has no recognisable start (RLE): needs a table or one fragment/frame
    kJpeg,      // FF D8 (JPEG, JPEG-LS)
    kJpeg2000,  // FF 4F FF 51 (codestream) or the JP2 signature box
};

// offsets: byte offsets of each frame's first fragment item, measured from the first byte of the
// first fragment item's tag (Basic or Extended Offset Table); empty when there is none.
// Returns one entry per frame, or kCorruptData naming `subject` when the layout is inconsistent.
Result<std::vector<FrameFragments>> mapFramesToFragments(int64_t frames,
                                                         std::span<const uint64_t> offsets,
                                                         std::span<const FragmentInfo> fragments,
                                                         StartMarker marker,
                                                         const std::string& subject);

bool startsFrame(const FragmentInfo& fragment, StartMarker marker);

}  // namespace voxseg::io::detail
