// Atomic output files: write to a temporary name beside the target, then rename over it, so a
// crash, a full disk or a cancel never leaves a half-written file under the final name.
//
//   AtomicFile out(path);              // picks "<dir>/.<name>.tmp-<random>"
//   write to out.tempPath() ...
//   VOXSEG_RETURN_IF_ERROR(out.commit());   // fsync + rename; otherwise the destructor removes it
//
// Not thread-safe per object; distinct objects are independent.
#pragma once

#include "core/status.h"

#include <string>

namespace voxseg {

class AtomicFile {
  public:
    explicit AtomicFile(std::string target_path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    const std::string& tempPath() const { return temp_path_; }
    const std::string& targetPath() const { return target_path_; }

    // Checks that the target folder exists and is writable (call before expensive work).
    Status checkWritable() const;
    // Flushes the temporary file to disk and renames it to the target.
    Status commit();

  private:
    std::string target_path_;
    std::string temp_path_;
    bool committed_ = false;
};

// Writes `text` to `path` through an AtomicFile (checks the folder, writes, flushes, renames).
Status writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace voxseg
