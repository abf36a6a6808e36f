#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace voxseg {
namespace {

Status openFailure(int err, std::string_view what, const std::string& path) {
    const StatusCode code =
        err == ENOENT || err == ENOTDIR ? StatusCode::kNotFound : StatusCode::kIoError;
    return Status(code, fmt::format("cannot read {}: {}", what, std::strerror(err)), path);
}

Status tooLarge(uint64_t size, std::string_view what, ReadLimit limit, const std::string& path) {
    return invalidArgument(
        fmt::format("{} is {} bytes > limit {} bytes{}{}", what, size, limit.max_bytes,
                    limit.advice.empty() ? "" : ": ", limit.advice),
        path);
}

struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
};

}  // namespace

Result<std::string> readFileBytes(const std::string& path, std::string_view what, ReadLimit limit) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return openFailure(errno, what, path);
    FdCloser closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) return openFailure(errno, what, path);
    if (S_ISDIR(st.st_mode)) return openFailure(EISDIR, what, path);
    const uint64_t reported = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
    if (limit.max_bytes > 0 && reported > limit.max_bytes)
        return tooLarge(reported, what, limit, path);

    std::string bytes;
    bytes.resize(reported > 0 ? reported : 4096);
    size_t used = 0;
    for (;;) {
        if (used == bytes.size()) bytes.resize(bytes.size() * 2);
        const ssize_t n = ::read(fd, bytes.data() + used, bytes.size() - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return ioError(fmt::format("reading {} failed: {}", what, std::strerror(errno)), path);
        if (n == 0) break;
        used += static_cast<size_t>(n);
        if (limit.max_bytes > 0 && used > limit.max_bytes)
            return tooLarge(used, what, limit, path);  // grew past the cap while being read
    }
    bytes.resize(used);
    return bytes;
}

int writeAllBytes(int fd, const void* data, size_t size, size_t* written) {
    const char* p = static_cast<const char*>(data);
    size_t done = 0;
    int err = 0;
    while (done < size) {
        const ssize_t n = ::write(fd, p + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n < 0 ? errno : ENOSPC;
            break;
        }
        done += static_cast<size_t>(n);
    }
    if (written) *written = done;
    if (err != 0) errno = err;
    return err;
}

}  // namespace voxseg
