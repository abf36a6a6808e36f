#include "io/dicom_codec_rle.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace voxseg::io::detail {
namespace {

uint32_t readLe32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// PackBits decoding of one segment into exactly `plane.size()` bytes; false when the segment
// ends early. Bytes decoded past the plane (encoder padding) are ignored.
bool unpackSegment(std::span<const uint8_t> segment, std::span<uint8_t> plane) {
    size_t in = 0, out = 0;
    while (out < plane.size() && in < segment.size()) {
        const auto n = static_cast<int8_t>(segment[in++]);
        if (n >= 0) {
            const size_t count = static_cast<size_t>(n) + 1;
            if (in + count > segment.size()) return false;
            const size_t copy = std::min(count, plane.size() - out);
            std::copy_n(segment.begin() + static_cast<std::ptrdiff_t>(in), copy,
                        plane.begin() + static_cast<std::ptrdiff_t>(out));
            in += count;
            out += copy;
        } else if (n != -128) {
            if (in >= segment.size()) return false;
            const uint8_t value = segment[in++];
            const size_t count = std::min(static_cast<size_t>(1 - n), plane.size() - out);
            std::fill_n(plane.begin() + static_cast<std::ptrdiff_t>(out), count, value);
            out += count;
        }
    }
    return out == plane.size();
}

}  // namespace

Status decodeRleFrame(std::span<const uint8_t> data, int64_t pixels, int bytes_per_sample,
                      std::span<uint32_t> out, const std::string& subject) {
    const auto damaged = [&](const std::string& what) {
        return corruptData("RLE data " + what +
                               ": the file is damaged or truncated; re-export it or check it with "
                               "gdcmconv -w",
                           subject);
    };
    if (static_cast<int64_t>(out.size()) < pixels)
        return internalError("RLE output buffer too small", subject);
    if (data.size() < 64) return damaged("shorter than its 64-byte header");
    const uint32_t segments = readLe32(data.data());
    if (segments != static_cast<uint32_t>(bytes_per_sample))
        return damaged(
            fmt::format("has {} segments where {} are expected", segments, bytes_per_sample));
    std::vector<uint64_t> offsets(segments + 1);
    for (uint32_t s = 0; s < segments; ++s) offsets[s] = readLe32(data.data() + 4 + 4 * s);
    offsets[segments] = data.size();
    for (uint32_t s = 0; s < segments; ++s)
        if (offsets[s] < 64 || offsets[s] >= offsets[s + 1])
            return damaged(fmt::format("segment {} offset {} is outside the frame ({} bytes)",
                                       s + 1, offsets[s], data.size()));

    std::vector<uint8_t> plane(static_cast<size_t>(pixels));
    std::fill_n(out.begin(), pixels, 0u);
    for (uint32_t s = 0; s < segments; ++s) {
        const auto segment = data.subspan(offsets[s], offsets[s + 1] - offsets[s]);
        if (!unpackSegment(segment, plane))
            return damaged(fmt::format("segment {} decodes to fewer than {} bytes", s + 1, pixels));
        // Segment 0 holds the most significant byte of each sample.
        const int shift = 8 * (bytes_per_sample - 1 - static_cast<int>(s));
        for (int64_t i = 0; i < pixels; ++i) out[i] |= uint32_t{plane[i]} << shift;
    }
    return Status::ok();
}

}  // namespace voxseg::io::detail
