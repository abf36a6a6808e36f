// Whole-file reads and complete writes to a file descriptor: the one copy every layer uses.
//
//   VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(path, "the edit journal"));
//   VOXSEG_ASSIGN_OR_RETURN(std::string csv, readFileBytes(path, "manifest",
//                                                          {kMaxManifestBytes, "split it"}));
//   if (int err = writeAllBytes(fd, line.data(), line.size())) ... std::strerror(err) ...
#pragma once

#include "core/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace voxseg {

// A size cap for readFileBytes.
struct ReadLimit {
    uint64_t max_bytes = 0;   // 0: no cap
    std::string_view advice;  // what to do instead, appended to the refusal ("split it ...")
};

// Reads the whole file at `path` as bytes. `what` names the file in messages ("the edit
// journal"); the path is the status's subject. Errors:
//   kNotFound        the file (or a folder on its path) does not exist;
//   kIoError         it cannot be opened or read, or is a folder (the message carries strerror);
//   kInvalidArgument it is larger than limit.max_bytes: "<what> is N bytes > limit M bytes",
//                    refused before its bytes are read (and if it grows past the cap meanwhile).
// Files whose size the kernel does not report (/proc) are read to their end.
Result<std::string> readFileBytes(const std::string& path, std::string_view what = "the file",
                                  ReadLimit limit = {});

// Writes all `size` bytes at `data` to `fd`, retrying on EINTR and after short writes.
// Returns 0, or the errno of the write that failed (ENOSPC for a write that wrote nothing);
// errno is left set as well. `written`, when given, receives the bytes written in either case.
int writeAllBytes(int fd, const void* data, size_t size, size_t* written = nullptr);

}  // namespace voxseg
