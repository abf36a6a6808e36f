#include "edit/journal.h"

#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace voxseg::edit {

Result<JournalWriter> JournalWriter::open(const std::string& path, bool truncate) {
    const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0);
    const int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0)
        return ioError(std::string("cannot open the edit journal: ") + std::strerror(errno), path);
    JournalWriter w;
    w.fd_ = fd;
    w.path_ = path;
    return w;
}

JournalWriter::JournalWriter(JournalWriter&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) {
    o.fd_ = -1;
}
JournalWriter& JournalWriter::operator=(JournalWriter&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        path_ = std::move(o.path_);
        o.fd_ = -1;
    }
    return *this;
}
JournalWriter::~JournalWriter() {
    if (fd_ >= 0) ::close(fd_);
}

Status JournalWriter::append(const EditOp& op) {
    if (fd_ < 0) return Status(StatusCode::kFailedPrecondition, "journal is closed", path_);
    const std::string line = toJsonLine(op) + "\n";
    if (const int err = writeAllBytes(fd_, line.data(), line.size()))
        return ioError(std::string("cannot write the edit journal: ") + std::strerror(err), path_);
    if (::fsync(fd_) != 0)
        return ioError(std::string("cannot sync the edit journal: ") + std::strerror(errno), path_);
    return {};
}

Result<std::vector<JournalLine>> readJournal(const std::string& path, bool* torn_tail) {
    VOXSEG_ASSIGN_OR_RETURN(const std::string text, readFileBytes(path, "the edit journal"));
    if (torn_tail) *torn_tail = false;
    std::vector<JournalLine> out;
    size_t start = 0;
    int number = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        const bool complete = end != std::string::npos;
        if (!complete) end = text.size();
        std::string line = text.substr(start, end - start);
        start = end + 1;
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        auto op = parseEditOp(line);
        if (!op.isOk()) {
            if (!complete && torn_tail) {
                *torn_tail = true;
                break;
            }
            return Status(op.status().code(),
                          fmt::format("line {}: {}", number, op.status().message()), path);
        }
        out.push_back({number, std::move(op).value()});
    }
    return out;
}

Result<ReplayReport> replayJournal(const std::string& path, LabelEditor& editor) {
    VOXSEG_ASSIGN_OR_RETURN(auto lines, readJournal(path));
    return applyJournalLines(lines, editor, path);
}

Result<ReplayReport> applyJournalLines(const std::vector<JournalLine>& lines, LabelEditor& editor,
                                       const std::string& path) {
    ReplayReport report;
    for (const JournalLine& l : lines) {
        auto r = editor.apply(l.op);
        if (!r.isOk())
            return Status(r.status().code(),
                          fmt::format("line {}: {}", l.line, r.status().message()), path);
        ++report.ops_applied;
        report.voxels_changed += r->voxels_changed;
    }
    return report;
}

}  // namespace voxseg::edit
