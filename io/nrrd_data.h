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

// Reads the `bytes` bytes of raw or gzip data into `dst` (host byte order; `element_size` bytes
// per value) and returns true. ASCII and hex data are checked to hold `values` values (`bytes`
// bytes; ASCII values as NrrdIO reads them, `floating` for float and double types), and false
// is returned: NrrdIO reads them. kCorruptData names the file and what is missing or damaged,
// kUnsupported data voxseg cannot read (bzip2: ITK's NrrdIO is built without it).
Result<bool> readNrrdData(const std::string& path, void* dst, int64_t bytes, int element_size,
                          int64_t values, bool floating, const Progress& progress = {});

}  // namespace voxseg::io
