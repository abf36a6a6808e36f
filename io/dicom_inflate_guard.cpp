#include "io/dicom_inflate_guard.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace voxseg::io {
namespace {

constexpr char kDeflatedSyntax[] = "1.2.840.10008.1.2.1.99";

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t le32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

bool longLength(const uint8_t* vr) {
    static const char* const kLong[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ",
                                        "SV", "UC", "UN", "UR", "UT", "UV"};
    for (const char* v : kLong)
        if (std::memcmp(vr, v, 2) == 0) return true;
    return false;
}

// Walks the File Meta Information (explicit VR little endian, group 0002) in the file's first
// bytes: the transfer syntax and the offset where the dataset starts; false when the meta
// group does not fit `head` or cannot be parsed.
bool readMeta(const std::vector<uint8_t>& head, std::string* syntax, uint64_t* dataset_offset) {
    size_t at = 132;
    while (at + 8 <= head.size() && le16(head.data() + at) == 0x0002) {
        const uint8_t* h = head.data() + at;
        size_t length = le16(h + 6), header = 8;
        if (longLength(h + 4)) {
            if (at + 12 > head.size()) return false;
            length = le32(h + 8);
            header = 12;
        }
        if (at + header + length > head.size()) return false;
        if (le16(h + 2) == 0x0010) {
            std::string v(reinterpret_cast<const char*>(h + header), length);
            while (!v.empty() && (v.back() == '\0' || v.back() == ' ')) v.pop_back();
            *syntax = v;
        }
        at += header + length;
    }
    *dataset_offset = at;
    return at + 8 <= head.size() || at == head.size();
}

}  // namespace

Status checkInflatedSize(const std::string& path, uint64_t limit) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> head(16 * 1024);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (head.size() < 140 || std::memcmp(head.data() + 128, "DICM", 4) != 0) return Status::ok();
    std::string syntax;
    uint64_t offset = 0;
    if (!readMeta(head, &syntax, &offset) || syntax != kDeflatedSyntax) return Status::ok();
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));

    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return internalError("zlib inflateInit2", path);
    std::vector<char> input(1 << 20), output(1 << 20);
    uint64_t inflated = 0;
    int rc = Z_OK;
    while (rc == Z_OK && inflated <= limit) {
        if (z.avail_in == 0) {
            in.read(input.data(), static_cast<std::streamsize>(input.size()));
            if (in.gcount() == 0) break;
            z.next_in = reinterpret_cast<Bytef*>(input.data());
            z.avail_in = static_cast<uInt>(in.gcount());
        }
        z.next_out = reinterpret_cast<Bytef*>(output.data());
        z.avail_out = static_cast<uInt>(output.size());
        rc = inflate(&z, Z_NO_FLUSH);
        inflated += output.size() - z.avail_out;
        if (rc == Z_BUF_ERROR) rc = Z_OK;  // no progress possible: more input needed
    }
    const std::string zlib_message = z.msg ? z.msg : "zlib error";
    inflateEnd(&z);
    if (inflated > limit) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        return unsupported(fmt::format("deflated file of {} bytes inflates to more than {} bytes "
                                       "(limit {} bytes per file): a deflate bomb or a damaged "
                                       "file, refused before decoding; raise "
                                       "--max-inflated-bytes if this is real",
                                       ec ? 0 : size, inflated, limit),
                           path);
    }
    if (rc != Z_OK && rc != Z_STREAM_END)
        return corruptData(fmt::format("the deflated dataset is damaged ({}) after {} bytes",
                                       zlib_message, inflated),
                           path);
    return Status::ok();
}

}  // namespace voxseg::io
