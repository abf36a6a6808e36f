// The data of a NRRD file (.nrrd, or the file a .nhdr names), checked or read by voxseg rather
// than ITK's NrrdIO. NrrdIO (ITK 5.2) reads ASCII values with an unbounded fscanf("%s") into a
// 1025-byte stack buffer (a long token crashed `voxseg convert`), and leaks its Nrrd, gzip state
// and error strings (30-60 KB) each time damaged or short data makes it fail (fuzz_image_nrrd ran
// out of memory). So voxseg reads raw and gzip data itself (inflating straight into the volume:
// one pass, as NrrdIO's) and hands NrrdIO only ASCII and hex data it has checked. ITK still
// parses the header (geometry, type). Thread-safe: no shared state.
#pragma once

#include "core/progress.h"
#include "core/status.h"

#include <cstdint>
#include <string>

namespace voxseg::io {

// Ok when the data file of the NRRD header at `path` lies in the header's folder and exists, and
// the data's line skip lies in it (data split over several files, LIST or %d formats, is
// kUnsupported): what NrrdIO opens and reads while it reads the header (an
// absolute "data file: /dev/stdin" would block it). openImageIO runs it before ITK does.
Status checkNrrdLayout(const std::string& path);

// What the header claims of the data, checked before the image is allocated (issue 35: memory
// only after trust): raw data must hold `bytes` bytes after the header, line skip and byte skip;
// gzip data must be able to inflate to them (deflate's 1032:1, gzip_reader.h); ASCII data must
// hold `values` values (`floating` as for readNrrdData), hex data 2 * `bytes` digits (both
// counted through a small buffer); bzip2 is kUnsupported. kCorruptData names the file, the
// claim and what it holds. Returns true for gzip data (--max-inflated-bytes applies to it).
Result<bool> checkNrrdDataClaim(const std::string& path, int64_t bytes, int64_t values,
                                bool floating);

// Reads the `bytes` bytes of raw or gzip data into `dst` (host byte order; `element_size` bytes
// per value) and returns true. ASCII and hex data are checked to hold `values` values (`bytes`
// bytes; ASCII values as NrrdIO reads them, `floating` for float and double types), and false
// is returned: NrrdIO reads them. kCorruptData names the file and what is missing or damaged,
// kUnsupported data voxseg cannot read (bzip2: ITK's NrrdIO is built without it).
Result<bool> readNrrdData(const std::string& path, void* dst, int64_t bytes, int element_size,
                          int64_t values, bool floating, const Progress& progress = {});

}  // namespace voxseg::io
