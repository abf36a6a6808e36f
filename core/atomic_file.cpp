#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace voxseg {
namespace fs = std::filesystem;

AtomicFile::AtomicFile(std::string target_path) : target_path_(std::move(target_path)) {
    const fs::path target(target_path_);
    std::random_device rd;
    const auto tag = std::to_string(rd()) + std::to_string(::getpid());
    // Keep the extension last so libraries that dispatch on it (ITK) still recognise the file.
    const std::string name = target.filename().string();
    temp_path_ = (target.parent_path() / (".tmp-" + tag + "-" + name)).string();
}

AtomicFile::~AtomicFile() {
    if (!committed_) {
        std::error_code ec;
        fs::remove(temp_path_, ec);
    }
}

Status AtomicFile::checkWritable() const {
    fs::path dir = fs::path(target_path_).parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return ioError("output folder does not exist: create it or choose another path",
                       target_path_);
    if (::access(dir.c_str(), W_OK) != 0)
        return ioError(std::string("output folder is not writable: ") + std::strerror(errno),
                       target_path_);
    return Status::ok();
}

Status AtomicFile::commit() {
    const int fd = ::open(temp_path_.c_str(), O_RDONLY);
    if (fd < 0)
        return ioError(std::string("temporary output vanished: ") + std::strerror(errno),
                       target_path_);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0)
        return ioError(std::string("could not flush output: ") + std::strerror(err), target_path_);
    std::error_code ec;
    fs::rename(temp_path_, target_path_, ec);
    if (ec) return ioError("could not rename output into place: " + ec.message(), target_path_);
    committed_ = true;
    return Status::ok();
}

Status writeFileAtomically(const std::string& path, const std::string& text) {
    AtomicFile out(path);
    VOXSEG_RETURN_IF_ERROR(out.checkWritable());
    {
        std::ofstream f(out.tempPath(), std::ios::binary | std::ios::trunc);
        if (!f) return ioError(std::string("cannot create file: ") + std::strerror(errno), path);
        f.write(text.data(), static_cast<std::streamsize>(text.size()));
        f.flush();
        if (!f) return ioError("write failed (disk full?)", path);
    }
    return out.commit();
}

}  // namespace voxseg
