#include "io/gzip_reader.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace voxseg::io {

Result<GzipReader> GzipReader::open(const std::string& path, int64_t offset) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ioError(std::string("cannot open: ") + std::strerror(errno), path);
    if (::lseek(fd, offset, SEEK_SET) != offset) {
        ::close(fd);
        return ioError("cannot seek to the compressed data", path);
    }
    gzFile f = gzdopen(fd, "rb");  // reads from the descriptor's position; gzclose closes it
    if (f == nullptr) {
        ::close(fd);
        return ioError("cannot open the gzip stream", path);
    }
    gzbuffer(f, 1 << 18);
    return GzipReader(f, path);
}

GzipReader::GzipReader(GzipReader&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)),
      truncated_(other.truncated_) {}

GzipReader& GzipReader::operator=(GzipReader&& other) noexcept {
    std::swap(file_, other.file_);
    std::swap(path_, other.path_);
    std::swap(truncated_, other.truncated_);
    return *this;
}

GzipReader::~GzipReader() {
    if (file_) gzclose(static_cast<gzFile>(file_));
}

Result<int64_t> GzipReader::read(void* dst, int64_t n) {
    auto* f = static_cast<gzFile>(file_);
    int64_t done = 0;
    while (done < n) {
        const auto want = static_cast<unsigned>(std::min<int64_t>(n - done, INT_MAX / 2));
        const int got = gzread(f, static_cast<char*>(dst) + done, want);
        int errnum = Z_OK;
        const char* msg = gzerror(f, &errnum);
        if (got < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) {
            // gzerror prefixes the stream's name, "<fd:N>" for gzdopen; the path is named anyway.
            std::string reason = msg ? msg : "?";
            if (reason.rfind("<fd:", 0) == 0 && reason.find(">: ") != std::string::npos)
                reason = reason.substr(reason.find(">: ") + 3);
            return corruptData("gzip stream is damaged: " + reason, path_);
        }
        if (got == 0) {
            truncated_ = errnum == Z_BUF_ERROR;  // the file ends inside the stream
            break;
        }
        done += got;
    }
    return done;
}

bool inflateGzipExactly(const std::string& path, int64_t offset, void* dst, int64_t bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    void* map = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && st.st_size > offset)
        map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return false;
    const auto size = static_cast<size_t>(st.st_size);
    ::madvise(map, size, MADV_SEQUENTIAL);
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    const auto* in = static_cast<const unsigned char*>(map);
    auto* out = static_cast<char*>(dst);
    size_t in_pos = static_cast<size_t>(offset), out_pos = 0;
    const auto want = static_cast<size_t>(bytes);
    bool ok = d != nullptr;
    while (ok && out_pos < want) {
        size_t used = 0, got = 0;
        ok = libdeflate_gzip_decompress_ex(d, in + in_pos, size - in_pos, out + out_pos,
                                           want - out_pos, &used, &got) == LIBDEFLATE_SUCCESS &&
             got > 0;
        in_pos += used;
        out_pos += got;
    }
    // Exactly: no further member follows (zlib ignores trailing bytes that are not gzip).
    ok = ok && !(size - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b);
    if (d) libdeflate_free_decompressor(d);
    ::munmap(map, size);
    return ok;
}

Result<GzipCount> countGzipBytes(const std::string& path, int64_t offset, int64_t enough) {
    VOXSEG_ASSIGN_OR_RETURN(GzipReader gz, GzipReader::open(path, offset));
    GzipCount count;
    std::vector<char> buf(1 << 20);
    while (count.bytes < enough) {
        VOXSEG_ASSIGN_OR_RETURN(
            const int64_t n,
            gz.read(buf.data(), std::min<int64_t>(enough - count.bytes, buf.size())));
        if (n == 0) {
            count.ended = !gz.truncated();
            break;
        }
        count.bytes += n;
    }
    return count;
}

int64_t maxInflatedBytes(int64_t compressed) {
    constexpr int64_t kSlack = 1 << 16;
    const int64_t c = std::max<int64_t>(0, compressed);
    if (c > (INT64_MAX - kSlack) / kMaxDeflateRatio) return INT64_MAX;
    return c * kMaxDeflateRatio + kSlack;
}

Status checkDeflateCanHold(const std::string& path, const std::string& what, int64_t claimed,
                           int64_t compressed) {
    if (claimed <= maxInflatedBytes(compressed)) return Status::ok();
    return corruptData(
        fmt::format("file is truncated: the header claims {} bytes of voxel data, "
                    "but {} holds {} compressed bytes, which cannot inflate to "
                    "more than {} (deflate's limit is {}:1); re-export or re-copy "
                    "it",
                    claimed, what, compressed, maxInflatedBytes(compressed), kMaxDeflateRatio),
        path);
}

Status checkInflatedLimit(const std::string& path, const std::string& what, int64_t claimed,
                          uint64_t limit) {
    if (claimed <= 0 || static_cast<uint64_t>(claimed) <= limit) return Status::ok();
    return unsupported(fmt::format("the header claims {} bytes of voxel data in {} (limit {} bytes "
                                   "inflated per file): refused before inflating; raise "
                                   "--max-inflated-bytes if this is real",
                                   claimed, what, limit),
                       path);
}

}  // namespace voxseg::io
