// Checks of one DICOM instance a node received, before it answers the C-STORE: is the instance
// one the node can use? The storage SCP (io/dicom_net_scp.cpp) runs them on the file it received
// (meta header + the data set as it came): the nesting scan before anything parses the file,
// the read limits on what the header claims, then the pixel data through the pixel reader
// (io/dicom_pixels.h), so that an instance the segmentation would fail on later is refused
// while the sender can still do something about it.
//
// Each problem comes with the DIMSE status class it is answered with (PS3.4 B.2.3, PS3.7 C):
//   kTooDeep, kUnreadable, kUnsupported -> 0xC000 "Error: cannot understand": the node cannot
//       parse or decode it; sending the same bytes again cannot help (a sender may transcode);
//   kOverLimit -> 0xA700 "Refused: out of resources": valid, but larger than this node's limits
//       (core/limits.h, the --max-* options); an operator who raises them makes a retry succeed;
//   kPixelData -> 0xA900 "Error: data set does not match SOP class": the Image Pixel module is
//       broken (truncated Pixel Data, fragments that do not make the frames, a frame that does
//       not decode): the sender's copy is damaged; a fresh export is what helps.
// Internal to io/. Thread safety: reentrant (no shared state besides readLimits()).
#pragma once

#include "core/status.h"
#include "io/dicom_pixels.h"

#include <cstdint>
#include <string>

namespace voxseg::io {

enum class InstanceProblem {
    kNone,
    kTooDeep,      // sequences nest deeper than readLimits().nesting_depth
    kUnreadable,   // not a DICOM data set DCMTK can parse
    kOverLimit,    // claims more frames or larger frames than readLimits() allows
    kPixelData,    // Pixel Data truncated or damaged
    kUnsupported,  // valid, but a pixel encoding voxseg does not read (colour, transfer syntax)
};

struct InstanceCheck {
    InstanceProblem problem = InstanceProblem::kNone;
    Status status;  // why; the subject is the name given to the check
    bool ok() const { return problem == InstanceProblem::kNone; }
};

// Sequence nesting, from the bytes, before any parser reads the file.
InstanceCheck checkInstanceNesting(const std::string& path, const std::string& name);
// The claim against readLimits() (frames per file, bytes per frame).
InstanceCheck checkInstanceLimits(const PixelFormat& claim, const std::string& name);
// The pixel data: the reader's checks (native Pixel Data long enough for every frame; an
// encapsulated one has fragments), then, for encapsulated syntaxes, the first and the last frame
// decoded (the fragments map to the frames and the codec can read them).
InstanceCheck checkInstancePixels(const std::string& path, const std::string& name);

}  // namespace voxseg::io
