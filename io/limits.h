// Resource limits of voxseg's readers, in one place (ITK-free: the pixel reader and its fuzz
// target include it). A header that claims more is refused with a message that names the file,
// the claim and the limit, before anything of that size is allocated: a corrupt or hostile file
// must not end in an allocation failure.
#pragma once

#include <cstdint>

namespace voxseg::io {

// Largest volume loadSeries() or readImage() decodes (voxels, before and after resampling):
// 2e9 int16 voxels are 4 GB. loadSeries() takes another limit (DicomLoadOptions::max_voxels,
// --max-voxels).
inline constexpr int64_t kDefaultMaxVoxels = 2'000'000'000;

// Most frames one file may claim (enhanced CT/MR and 4D series hold thousands): the scan skips a
// file that claims more before it builds a per-frame list.
inline constexpr int64_t kMaxFramesPerFile = 100'000;

}  // namespace voxseg::io
