#include "io/dicom_instance_check.h"

#include "core/limits.h"
#include "io/dicom_nesting.h"
#include "io/dicom_pixels.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace voxseg::io {
namespace {

InstanceCheck problem(InstanceProblem p, const Status& s, const std::string& name) {
    return InstanceCheck{p, Status(s.code(), s.message(), name)};
}

}  // namespace

InstanceCheck checkInstanceNesting(const std::string& path, const std::string& name) {
    const Status s = checkDicomNesting(path);
    if (s.isOk()) return {};
    // kUnsupported is the limit; anything else is a file the scan could not walk.
    return problem(s.code() == StatusCode::kUnsupported ? InstanceProblem::kTooDeep
                                                        : InstanceProblem::kUnreadable,
                   s, name);
}

InstanceCheck checkInstanceLimits(const PixelClaim& c, const std::string& name) {
    const ReadLimits& limits = readLimits();
    if (c.frames > limits.frames_per_file)
        return {InstanceProblem::kOverLimit,
                unsupported(fmt::format("NumberOfFrames {} is over the limit of {} frames per "
                                        "file (--max-frames-per-file)",
                                        c.frames, limits.frames_per_file),
                            name)};
    const uint64_t frame_bytes =
        (static_cast<uint64_t>(std::max<int64_t>(c.rows, 0)) *
             static_cast<uint64_t>(std::max<int64_t>(c.columns, 0)) *
             static_cast<uint64_t>(std::max<int64_t>(c.samples_per_pixel, 1)) *
             static_cast<uint64_t>(std::max<int64_t>(c.bits_allocated, 0)) +
         7) /
        8;
    if (frame_bytes > limits.frame_bytes)
        return {InstanceProblem::kOverLimit,
                unsupported(fmt::format("frames of {} x {} pixels x {} samples at {} bits ({} "
                                        "bytes) are over the limit of {} bytes per frame "
                                        "(--max-frame-bytes)",
                                        c.columns, c.rows, c.samples_per_pixel, c.bits_allocated,
                                        frame_bytes, limits.frame_bytes),
                            name)};
    return {};
}

InstanceCheck checkInstancePixels(const std::string& path, const std::string& name) {
    auto reader = DicomPixelReader::open(path);
    if (!reader.isOk()) {
        const Status& s = reader.status();
        switch (s.code()) {
            case StatusCode::kCorruptData:
                return problem(InstanceProblem::kPixelData, s, name);
            case StatusCode::kUnsupported:
                return problem(InstanceProblem::kUnsupported, s, name);
            default:  // an I/O error or no memory: ours, not the instance's
                return problem(InstanceProblem::kUnreadable, s, name);
        }
    }
    const PixelFormat& f = reader->format();
    std::vector<int32_t> frame(static_cast<size_t>(f.pixelsPerFrame()));
    for (const int64_t i : {int64_t{0}, f.frames - 1}) {
        const Status s = reader->readFrame(i, frame);
        if (!s.isOk())
            return problem(s.code() == StatusCode::kUnsupported ? InstanceProblem::kUnsupported
                                                                : InstanceProblem::kPixelData,
                           s, name);
        if (f.frames == 1) break;
    }
    return {};
}

}  // namespace voxseg::io
