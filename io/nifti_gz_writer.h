// Parallel gzip compression of a file, used to write .nii.gz faster than single-threaded zlib.
//
// The input is cut into fixed-size chunks; each chunk is compressed by libdeflate on a worker
// thread into a complete gzip member (header, deflate data, CRC-32, size), and the members are
// written in order. A concatenation of gzip members is itself a valid gzip file (RFC 1952 2.2);
// zlib's gzread (ITK, FSL, AFNI), Python's gzip (nibabel) and `gzip -d` read all members. This is
// the layout bgzip (BGZF) uses for genomics files. Memory stays bounded: at most 2 chunks per
// thread are in flight, whatever the file size. Thread safety: reentrant; uses its own threads.
#pragma once

#include "core/progress.h"
#include "core/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace voxseg::io {

struct ParallelGzipOptions {
    int level = 6;                         // libdeflate level 1..12 (6 is zlib's default)
    int threads = 0;                       // 0 = all cores
    size_t chunk_bytes = size_t{1} << 20;  // uncompressed bytes per gzip member
};

// Compresses the whole of `src_path` into `dst_path` (created or truncated). Errors name the file.
Status gzipFileParallel(const std::string& src_path, const std::string& dst_path,
                        const ParallelGzipOptions& options = {}, const Progress& progress = {});

// Compresses the concatenation of `parts` (e.g. a NIfTI header and the voxels, in memory) into
// `dst_path`: the same bytes gzipFileParallel writes for a file holding that concatenation. The
// parts must stay unchanged until it returns.
Status gzipBuffersParallel(std::span<const std::span<const uint8_t>> parts,
                           const std::string& dst_path, const ParallelGzipOptions& options = {},
                           const Progress& progress = {});

}  // namespace voxseg::io
