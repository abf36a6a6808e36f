// Where a retrieve (C-MOVE, WADO-RS) puts a series: a staging folder next to the target
// ("<target>.partial-XXXXXX", same file system), renamed to the target in one step when every
// instance arrived, and removed otherwise, so the target either holds the whole series or does
// not exist (nothing half-written is ever opened). Instances are written under temporary names
// in the staging folder and renamed to their final name when complete. Not thread-safe.
#pragma once

#include "core/status.h"
#include "io/pacs_query.h"

#include <memory>
#include <string>
#include <vector>

namespace voxseg::io {

class RetrieveFolder {
  public:
    // Refuses a target that exists (the caller picks a new one); creates its parent.
    static Result<std::unique_ptr<RetrieveFolder>> create(const std::string& target);
    ~RetrieveFolder();  // removes the staging folder unless committed
    RetrieveFolder(const RetrieveFolder&) = delete;
    RetrieveFolder& operator=(const RetrieveFolder&) = delete;

    const std::string& staging() const { return staging_; }
    // The final name of the next instance in the staging folder ("IM00001.dcm", ...).
    std::string nextFileName();
    // Records `name` (a file now complete in the staging folder).
    void added(const std::string& name) { names_.push_back(name); }
    int count() const { return static_cast<int>(names_.size()); }
    // Renames the staging folder to the target.
    Result<RetrievedSeries> commit();

  private:
    RetrieveFolder(std::string target, std::string staging);
    std::string target_;
    std::string staging_;
    std::vector<std::string> names_;
    int next_ = 0;
    bool committed_ = false;
};

}  // namespace voxseg::io
