// A gzip stream read from a byte offset of a file through zlib's gz* interface, so several
// gzip members in a row (voxseg's parallel .nii.gz writer, pigz) read as one stream and each
// member's CRC is checked at its end. Used where ITK's readers fall short: the completeness
// check of .nii.gz (ITK zero-fills a short stream) and gzip-encoded NRRD data, which voxseg
// inflates itself (ITK's NrrdIO leaks on damaged data; io/nrrd_data.h). Movable, not copyable;
// one thread at a time.
#pragma once

#include "core/limits.h"
#include "core/status.h"

#include <cstdint>
#include <string>

namespace voxseg::io {

class GzipReader {
  public:
    // The stream that starts at byte `offset` of `path`.
    static Result<GzipReader> open(const std::string& path, int64_t offset);
    GzipReader(GzipReader&& other) noexcept;
    GzipReader& operator=(GzipReader&& other) noexcept;
    GzipReader(const GzipReader&) = delete;
    GzipReader& operator=(const GzipReader&) = delete;
    ~GzipReader();

    // Up to `n` inflated bytes into `dst`: 0 at the stream's end or where the file ends inside
    // it (a truncated file: `truncated()` then says so). Damaged data (a deflate or CRC error)
    // is kCorruptData naming the file and zlib's reason.
    Result<int64_t> read(void* dst, int64_t n);
    bool truncated() const { return truncated_; }

  private:
    GzipReader(void* file, std::string path) : file_(file), path_(std::move(path)) {}
    void* file_ = nullptr;  // gzFile, kept out of this header (zlib.h)
    std::string path_;
    bool truncated_ = false;
};

// Inflates the gzip members that start at byte `offset` of `path` into `dst` with libdeflate
// (about 2-3x zlib's speed; the file is mapped, not copied) and returns true when they hold
// exactly `bytes` bytes, each member's CRC checked. False for anything else (a longer, shorter or
// damaged stream): the caller then reads with GzipReader, which accepts a longer stream and
// names what is wrong with the others. No progress while it runs (one call per member).
bool inflateGzipExactly(const std::string& path, int64_t offset, void* dst, int64_t bytes);

struct GzipCount {
    int64_t bytes = 0;   // inflated bytes, at most `enough` (counting stops there)
    bool ended = false;  // the stream ended cleanly before `enough` bytes
};

// Inflates `path` from byte `offset` until `enough` bytes came out or the stream ended, keeping
// nothing: a stream that stops short gives the bytes so far with `ended` false.
Result<GzipCount> countGzipBytes(const std::string& path, int64_t offset, int64_t enough);

// Deflate's largest expansion: a 258-byte match coded in 2 bits (a one-bit length code, a one-bit
// distance code) gives 1032 bytes out per byte in (zlib's FAQ: 1032:1). So `compressed` bytes
// of deflate data cannot inflate to more than this (plus a little for a stream's first block):
// a proof, unlike a gzip trailer's ISIZE (set by the writer, modulo 2^32) or a typical ratio,
// which are hints only.
inline constexpr int64_t kMaxDeflateRatio = 1032;
int64_t maxInflatedBytes(int64_t compressed);

// What a header claims of compressed data, checked before anything of that size is allocated.
// `claimed` inflated bytes must be able to come out of `compressed` bytes of deflate data: else
// kCorruptData (the data is truncated), naming the claim, the size and `what` ("the NIfTI's gzip
// stream").
Status checkDeflateCanHold(const std::string& path, const std::string& what, int64_t claimed,
                           int64_t compressed);
// And within `limit` (--max-inflated-bytes, for every format's compressed data): else
// kUnsupported naming the claim, the limit and the option.
Status checkInflatedLimit(const std::string& path, const std::string& what, int64_t claimed,
                          uint64_t limit = readLimits().inflated_image_bytes);

}  // namespace voxseg::io
