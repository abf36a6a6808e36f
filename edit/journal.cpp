#include "edit/journal.h"

#include <fmt/format.h>

namespace voxseg::edit {

Result<JournalWriter> JournalWriter::open(const std::string& path, bool truncate) {
    JournalWriter w;
    VOXSEG_ASSIGN_OR_RETURN(
        w.file_, JournalFile::open(path, {.what = "the edit journal", .truncate = truncate}));
    return w;
}

JournalWriter::JournalWriter(JournalWriter&&) noexcept = default;
JournalWriter& JournalWriter::operator=(JournalWriter&&) noexcept = default;
JournalWriter::~JournalWriter() = default;

Status JournalWriter::append(const EditOp& op) {
    if (!file_.isOpen())
        return Status(StatusCode::kFailedPrecondition, "journal is closed", file_.path());
    return file_.append(toJsonLine(op));
}

Result<std::vector<JournalLine>> readJournal(const std::string& path, bool* torn_tail) {
    std::vector<JournalLine> out;
    auto parse = [&](std::string_view line, int number) -> Status {
        auto op = parseEditOp(std::string(line));
        if (!op.isOk()) return op.status();
        out.push_back({number, std::move(op).value()});
        return Status::ok();
    };
    VOXSEG_ASSIGN_OR_RETURN(const JournalReadReport report,
                            readJournalLines(path, "the edit journal", parse));
    if (torn_tail) *torn_tail = report.torn_line > 0;
    return out;
}

Result<ReplayReport> replayJournal(const std::string& path, LabelEditor& editor) {
    VOXSEG_ASSIGN_OR_RETURN(auto lines, readJournal(path));
    return applyJournalLines(lines, editor, path);
}

Result<ReplayReport> applyJournalLines(const std::vector<JournalLine>& lines, LabelEditor& editor,
                                       const std::string& path,
                                       const std::function<void()>& after_each) {
    ReplayReport report;
    for (const JournalLine& l : lines) {
        auto r = editor.apply(l.op);
        if (!r.isOk())
            return Status(r.status().code(),
                          fmt::format("line {}: {}", l.line, r.status().message()), path);
        ++report.ops_applied;
        report.voxels_changed += r->voxels_changed;
        if (after_each) after_each();
    }
    return report;
}

}  // namespace voxseg::edit
