#include "io/retrieve_folder.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace voxseg::io {

namespace fs = std::filesystem;

RetrieveFolder::RetrieveFolder(std::string target, std::string staging)
    : target_(std::move(target)), staging_(std::move(staging)) {}

Result<std::unique_ptr<RetrieveFolder>> RetrieveFolder::create(const std::string& target) {
    std::error_code ec;
    if (fs::exists(target, ec))
        return Status(StatusCode::kFailedPrecondition,
                      "the retrieve folder exists already; remove it or retrieve elsewhere",
                      target);
    const fs::path parent = fs::path(target).parent_path();
    if (!parent.empty()) {
        fs::create_directories(parent, ec);
        if (ec) return ioError("cannot create the folder: " + ec.message(), parent.string());
    }
    std::string tmpl = target + ".partial-XXXXXX";
    if (!mkdtemp(tmpl.data()))
        return ioError(std::string("cannot create a staging folder: ") + std::strerror(errno),
                       target);
    return std::unique_ptr<RetrieveFolder>(new RetrieveFolder(target, tmpl));
}

RetrieveFolder::~RetrieveFolder() {
    if (committed_) return;
    std::error_code ec;
    fs::remove_all(staging_, ec);
}

std::string RetrieveFolder::nextFileName() { return fmt::format("IM{:05d}.dcm", ++next_); }

Result<RetrievedSeries> RetrieveFolder::commit() {
    if (std::rename(staging_.c_str(), target_.c_str()) != 0)
        return ioError(
            std::string("cannot move the retrieved series into place: ") + std::strerror(errno),
            target_);
    committed_ = true;
    RetrievedSeries r;
    r.folder = target_;
    for (const auto& n : names_) r.files.push_back((fs::path(target_) / n).string());
    return r;
}

}  // namespace voxseg::io
