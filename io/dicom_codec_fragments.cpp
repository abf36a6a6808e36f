#include "io/dicom_codec_fragments.h"

#include <fmt/format.h>

namespace voxseg::io::detail {

bool startsFrame(const FragmentInfo& f, StartMarker marker) {
    const uint8_t* h = f.head;
    switch (marker) {
        case StartMarker::kNone:
            return false;
        case StartMarker::kJpeg:
            return f.head_size >= 2 && h[0] == 0xFF && h[1] == 0xD8;
        case StartMarker::kJpeg2000: {
            if (f.head_size >= 4 && h[0] == 0xFF && h[1] == 0x4F && h[2] == 0xFF && h[3] == 0x51)
                return true;
            static const uint8_t kJp2[12] = {0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50,
                                             0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A};
            if (f.head_size < 12) return false;
            for (int i = 0; i < 12; ++i)
                if (h[i] != kJp2[i]) return false;
            return true;
        }
    }
    return false;
}

namespace {

Result<std::vector<FrameFragments>> fromOffsets(int64_t frames, std::span<const uint64_t> offsets,
                                                std::span<const FragmentInfo> fragments,
                                                const std::string& subject) {
    // Item start positions: each item is an 8-byte header followed by its value.
    std::vector<size_t> first(static_cast<size_t>(frames));
    uint64_t position = 0;
    size_t fragment = 0;
    for (int64_t frame = 0; frame < frames; ++frame) {
        const uint64_t target = offsets[static_cast<size_t>(frame)];
        while (fragment < fragments.size() && position < target) {
            position += 8 + fragments[fragment].length;
            ++fragment;
        }
        if (fragment >= fragments.size() || position != target)
            return corruptData(
                fmt::format("the pixel data offset table is inconsistent (frame {} starts at byte "
                            "{}, which is not the start of a fragment): the file is damaged; "
                            "re-export it or rewrite it with gdcmconv -w",
                            frame + 1, target),
                subject);
        first[static_cast<size_t>(frame)] = fragment;
    }
    std::vector<FrameFragments> result(static_cast<size_t>(frames));
    for (size_t i = 0; i < result.size(); ++i) {
        const size_t end = i + 1 < result.size() ? first[i + 1] : fragments.size();
        if (end <= first[i])
            return corruptData(
                fmt::format("the pixel data offset table gives frame {} no fragment: the file is "
                            "damaged; re-export it or rewrite it with gdcmconv -w",
                            i + 1),
                subject);
        result[i] = {first[i], end - first[i]};
    }
    return result;
}

}  // namespace

Result<std::vector<FrameFragments>> mapFramesToFragments(int64_t frames,
                                                         std::span<const uint64_t> offsets,
                                                         std::span<const FragmentInfo> fragments,
                                                         StartMarker marker,
                                                         const std::string& subject) {
    if (frames < 1) return corruptData(fmt::format("NumberOfFrames is {}", frames), subject);
    if (fragments.empty())
        return corruptData(
            "the encapsulated pixel data holds no fragments: the file is damaged or truncated",
            subject);
    if (frames == 1) return std::vector<FrameFragments>{{0, fragments.size()}};
    if (static_cast<uint64_t>(frames) > fragments.size())
        return corruptData(fmt::format("the pixel data holds {} fragments for {} frames: the "
                                       "file is truncated or damaged",
                                       fragments.size(), frames),
                           subject);
    if (!offsets.empty()) {
        if (offsets.size() < static_cast<size_t>(frames))
            return corruptData(fmt::format("the pixel data offset table has {} entries for {} "
                                           "frames: the file is damaged",
                                           offsets.size(), frames),
                               subject);
        return fromOffsets(frames, offsets, fragments, subject);
    }
    std::vector<FrameFragments> result;
    result.reserve(static_cast<size_t>(frames));
    if (static_cast<uint64_t>(frames) == fragments.size()) {
        for (size_t i = 0; i < fragments.size(); ++i) result.push_back({i, 1});
        return result;
    }
    if (marker == StartMarker::kNone)
        return corruptData(fmt::format("{} fragments for {} frames and no offset table: cannot "
                                       "tell where frames start; rewrite the file with gdcmconv -w",
                                       fragments.size(), frames),
                           subject);
    for (size_t i = 0; i < fragments.size(); ++i) {
        if (startsFrame(fragments[i], marker)) {
            if (!result.empty()) result.back().count = i - result.back().first;
            result.push_back({i, 0});
        } else if (result.empty()) {
            return corruptData(
                "the first pixel data fragment does not start a compressed image: "
                "the file is damaged",
                subject);
        }
    }
    if (!result.empty()) result.back().count = fragments.size() - result.back().first;
    if (result.size() != static_cast<size_t>(frames))
        return corruptData(fmt::format("found {} compressed images in the pixel data for {} "
                                       "frames (no offset table): the file is damaged",
                                       result.size(), frames),
                           subject);
    return result;
}

}  // namespace voxseg::io::detail
