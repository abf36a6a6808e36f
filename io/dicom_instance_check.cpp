#include "io/dicom_instance_check.h"

#include "core/limits.h"
#include "io/dicom_nesting.h"
#include "io/dicom_pixels.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace voxseg::io {
namespace {

bool isNativeSyntax(const std::string& uid) {
    return uid == "1.2.840.10008.1.2" || uid == "1.2.840.10008.1.2.1" ||
           uid == "1.2.840.10008.1.2.2" || uid == "1.2.840.10008.1.2.1.99";
}

// The check's Status about `name`: the received file's temporary path means nothing to the
// sender or the operator reading the audit trail.
InstanceCheck problem(InstanceProblem p, const Status& s, const std::string& name,
                      const std::string& path = {}, const std::string& prefix = {}) {
    std::string message = prefix + s.message();
    for (size_t at = path.empty() ? std::string::npos : message.find(path); at != std::string::npos;
         at = message.find(path, at + name.size()))
        message.replace(at, path.size(), name);
    return InstanceCheck{p, Status(s.code(), std::move(message), name)};
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

InstanceCheck checkInstanceLimits(const PixelFormat& c, const std::string& name) {
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
                return problem(InstanceProblem::kPixelData, s, name, path);
            case StatusCode::kUnsupported:
                return problem(InstanceProblem::kUnsupported, s, name, path);
            default:  // an I/O error or no memory: ours, not the instance's
                return problem(InstanceProblem::kUnreadable, s, name, path);
        }
    }
    const PixelFormat& f = reader->format();
    // Native Pixel Data was checked whole by open() (its length against every frame); decoding
    // it would only copy it. Compressed frames are decoded, the first and the last.
    if (isNativeSyntax(f.transfer_syntax_uid)) return {};
    std::vector<int32_t> frame(static_cast<size_t>(f.pixelsPerFrame()));
    for (const int64_t i :
         f.frames > 1 ? std::vector<int64_t>{0, f.frames - 1} : std::vector<int64_t>{0}) {
        const Status s = reader->readFrame(i, frame);
        if (s.isOk()) continue;
        // open() accepted the transfer syntax, so a decoder that gives up on it (DCMTK's
        // "cannot change representation", reported as an unsupported syntax) met damaged data.
        const std::string prefix = fmt::format("frame {} of {} does not decode: ", i + 1, f.frames);
        if (s.code() == StatusCode::kUnsupported && s.message().rfind("transfer syntax", 0) == 0)
            return problem(InstanceProblem::kPixelData,
                           corruptData(fmt::format("the {} decoder gave up: the compressed data "
                                                   "is damaged",
                                                   f.transfer_syntax_uid)),
                           name, path, prefix);
        return problem(s.code() == StatusCode::kCorruptData ? InstanceProblem::kPixelData
                                                            : InstanceProblem::kUnsupported,
                       s, name, path, prefix);
    }
    return {};
}

}  // namespace voxseg::io
