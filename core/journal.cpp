#include "core/journal.h"

#include "core/file_io.h"
#include "core/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace voxseg {
namespace {

constexpr const char* kComponent = "journal";

bool isCompleteJson(std::string_view line) { return nlohmann::json::accept(line); }

bool isBlank(std::string_view line) {
    return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

Status ioFailure(std::string_view doing, std::string_view what, int err, const std::string& path) {
    return ioError(fmt::format("cannot {} {}: {}", doing, what, std::strerror(err)), path);
}

// The offset just past the last '\n' of the `size`-byte file (0 when it has none).
Result<off_t> lastLineStart(int fd, off_t size, std::string_view what, const std::string& path) {
    char buf[65536];
    off_t end = size;
    while (end > 0) {
        const off_t begin = std::max<off_t>(0, end - static_cast<off_t>(sizeof buf));
        const ssize_t n = ::pread(fd, buf, static_cast<size_t>(end - begin), begin);
        if (n < 0 && errno == EINTR) continue;
        if (n != end - begin) return ioFailure("read", what, n < 0 ? errno : EIO, path);
        for (ssize_t i = n; i > 0; --i)
            if (buf[i - 1] == '\n') return begin + i;
        end = begin;
    }
    return off_t{0};
}

// The 1-based number of the line starting at `offset` (newlines before it, plus one).
int lineNumberAt(int fd, off_t offset) {
    char buf[65536];
    int lines = 1;
    for (off_t at = 0; at < offset;) {
        const ssize_t n = ::pread(fd, buf, std::min<size_t>(sizeof buf, offset - at), at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        lines += static_cast<int>(std::count(buf, buf + n, '\n'));
        at += n;
    }
    return lines;
}

// Before the first append: a last line without newline is completed when it is whole JSON and
// cut off when it is a torn write.
Status repairTail(int fd, std::string_view what, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return ioFailure("read", what, errno, path);
    const off_t size = st.st_size;
    if (size == 0) return Status::ok();
    VOXSEG_ASSIGN_OR_RETURN(const off_t start, lastLineStart(fd, size, what, path));
    if (start == size) return Status::ok();  // ends with a newline
    std::string tail(static_cast<size_t>(size - start), '\0');
    if (::pread(fd, tail.data(), tail.size(), start) != static_cast<ssize_t>(tail.size()))
        return ioFailure("read", what, errno, path);
    if (!isBlank(tail) && isCompleteJson(tail)) {
        if (const int err = writeAllBytes(fd, "\n", 1)) return ioFailure("write", what, err, path);
        return Status::ok();
    }
    if (!isBlank(tail))
        log::warning(kComponent,
                     "{}: line {}: torn last line of {} ({} bytes, a write cut short "
                     "by a crash) removed before appending",
                     path, lineNumberAt(fd, start), what, tail.size());
    if (::ftruncate(fd, start) != 0) return ioFailure("repair", what, errno, path);
    return Status::ok();
}

}  // namespace

struct JournalFile::State {
    int fd = -1;
    std::string path;
    std::string what;
    JournalSync sync = JournalSync::kFsync;
    std::mutex mutex;
    ~State() {
        if (fd >= 0) ::close(fd);
    }
};

JournalFile::JournalFile() = default;
JournalFile::~JournalFile() = default;
JournalFile::JournalFile(JournalFile&&) noexcept = default;
JournalFile& JournalFile::operator=(JournalFile&&) noexcept = default;

Result<JournalFile> JournalFile::open(const std::string& path, const JournalOptions& options) {
    if (options.create_folders) {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    }
    const int flags = O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | (options.truncate ? O_TRUNC : 0);
    auto state = std::make_unique<State>();
    state->fd = ::open(path.c_str(), flags, static_cast<mode_t>(options.mode));
    if (state->fd < 0) return ioFailure("open", options.what, errno, path);
    state->path = path;
    state->what = std::string(options.what);
    state->sync = options.sync;
    VOXSEG_RETURN_IF_ERROR(repairTail(state->fd, options.what, path));
    JournalFile file;
    file.state_ = std::move(state);
    return file;
}

bool JournalFile::isOpen() const { return state_ && state_->fd >= 0; }

const std::string& JournalFile::path() const {
    static const std::string kNone;
    return state_ ? state_->path : kNone;
}

Status JournalFile::append(std::string_view record) {
    if (!isOpen()) return Status(StatusCode::kFailedPrecondition, "journal is not open");
    std::string line;
    line.reserve(record.size() + 1);
    line.append(record).push_back('\n');
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (const int err = writeAllBytes(state_->fd, line.data(), line.size()))
        return ioFailure("write", state_->what, err, state_->path);
    const int rc =
        state_->sync == JournalSync::kFsync ? ::fsync(state_->fd) : ::fdatasync(state_->fd);
    if (rc != 0 && errno != EINVAL)  // EINVAL: a file system that cannot sync (some FUSE)
        return ioFailure("sync", state_->what, errno, state_->path);
    return Status::ok();
}

Result<JournalReadReport> readJournalLines(const std::string& path, std::string_view what,
                                           const JournalLineParser& parse) {
    VOXSEG_ASSIGN_OR_RETURN(const std::string text, readFileBytes(path, what));
    // Where the last non-blank line starts: only that line can be a torn write.
    size_t last_start = std::string::npos;
    for (size_t start = 0; start < text.size();) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (!isBlank(std::string_view(text).substr(start, end - start))) last_start = start;
        start = end + 1;
    }
    JournalReadReport report;
    int number = 0;
    for (size_t start = 0; start < text.size();) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string_view line = std::string_view(text).substr(start, end - start);
        const bool last = start == last_start;
        start = end + 1;
        ++number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (isBlank(line)) continue;
        const Status parsed = parse(line, number);
        if (parsed.isOk()) {
            ++report.records;
            continue;
        }
        if (last && !isCompleteJson(line)) {
            log::warning(kComponent,
                         "{}: line {}: torn last line of {} dropped (a write cut "
                         "short by a crash): {}",
                         path, number, what, parsed.message());
            report.torn_line = number;
            break;
        }
        // Only the last line can be cut short by a crash (records are appended whole, in
        // order); a bad line before it means the file was damaged or edited.
        return Status(parsed.code(),
                      fmt::format("line {}: {} (a damaged line before the end of {}: restore "
                                  "the file from a backup or delete that line, then run again)",
                                  number, parsed.message(), what),
                      path);
    }
    return report;
}

}  // namespace voxseg
