// Sequence nesting limit for every DICOM read (issue 35). DCMTK 3.6.7's parser recurses once per
// sequence and item (DcmSequenceOfItems::read -> DcmItem::read -> ...) and has no depth limit or
// pre-parse hook of its own, so a 212 KB file nested 5,600 deep overflows the stack. These
// checks walk the encoded byte stream iteratively (an explicit depth counter, no recursion, a
// fixed buffer; values are skipped by seeking, never read) and refuse what nests deeper than the
// limit before DCMTK sees it.
//
// Depth counts one level per sequence with its item (SQ, or UN/private of undefined length that
// DCMTK reads as an implicit little endian sequence); encapsulated pixel data (OB/OW of
// undefined length with fragment items) is not nesting. Handles the 128-byte preamble + "DICM" +
// group 0002 or a bare data set, implicit VR LE, explicit VR LE/BE and deflated explicit VR LE
// (inflated as a stream, bounded by readLimits().inflated_bytes_per_file). Truncated or garbled
// input is left to DCMTK (ok), except where the walk cannot go on safely (corrupt data).
// Thread-safe (no shared state); the limit is read from readLimits() at each call by default.
#pragma once

#include "core/limits.h"
#include "core/status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace voxseg::io {

struct NestingCheckOptions {
    int limit = readLimits().nesting_depth;
    // Stop at the first Pixel Data element (7FE0,0010) at the top level: for callers that parse
    // only up to it (loadFileUntilTag). Default: the whole file, pixel data skipped by seeking.
    bool stop_at_pixel_data = false;
};

// Refuses a DICOM file whose sequences nest deeper than readLimits().nesting_depth, before
// DCMTK's recursive parser reads it. Status names the file, the depth reached and
// --max-nesting-depth (code kUnsupported, like the other read limits). Ok for files that are
// not DICOM or too short to tell (DCMTK reports those); an unreadable file is an io error.
Status checkDicomNesting(const std::string& path);
Status checkDicomNesting(const std::string& path, const NestingCheckOptions& options);

// The same for a DICOM file held in memory (preamble + meta, or a bare data set as DCMTK's
// DcmFileFormat::read accepts it); `name` is the subject of the Status.
Status checkDicomNestingBytes(const uint8_t* data, size_t size, const std::string& name,
                              const NestingCheckOptions& options = {});

// A data set without file meta (as received over the network), encoded in the transfer syntax
// `transfer_syntax_uid` (unknown UIDs are read as explicit VR little endian, as DCMTK does for
// the compressed syntaxes).
Status checkDicomDatasetNesting(const uint8_t* data, size_t size,
                                const std::string& transfer_syntax_uid, const std::string& name,
                                const NestingCheckOptions& options = {});

}  // namespace voxseg::io
