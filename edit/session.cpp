#include "edit/session.h"

#include "core/atomic_file.h"
#include "core/file_io.h"
#include "core/json_integer.h"
#include "core/log.h"
#include "edit/canvas.h"
#include "io/image_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace voxseg::edit {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
constexpr const char* kComponent = "edit";
constexpr const char* kBase = "base.nrrd";
constexpr const char* kJournal = "edits.jsonl";
constexpr const char* kSession = "session.json";

std::string nowUtc() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

Status writeSessionFile(const std::string& folder, const SessionOptions& o,
                        const std::string& started, const std::vector<SegmentMeta>& segments) {
    Json j{{"format", "voxseg-edit-session"},
           {"version", 1},
           {"source", o.source},
           {"series_uid", o.series_uid},
           {"started", started},
           {"segments", Json::parse(segmentsToJson(segments))}};
    return writeFileAtomically((fs::path(folder) / kSession).string(), j.dump(2) + "\n");
}

Result<RecoveryInfo> readSessionFile(const std::string& folder) {
    const std::string path = (fs::path(folder) / kSession).string();
    VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(path, "the edit session file"));
    RecoveryInfo info;
    info.folder = folder;
    try {
        const Json j = Json::parse(text);
        if (j.value("format", "") != "voxseg-edit-session" ||
            jsonInteger<int>(j, "version", 0) != 1)
            return invalidArgument("not a voxseg edit session (format, version 1)", path);
        info.source = j.at("source").get<std::string>();
        info.series_uid = j.at("series_uid").get<std::string>();
        info.started = j.at("started").get<std::string>();
        VOXSEG_ASSIGN_OR_RETURN(info.segments, segmentsFromJson(j.at("segments").dump()));
    } catch (const std::exception& e) {
        return invalidArgument(std::string("session file does not parse: ") + e.what(), path);
    }
    return info;
}

}  // namespace

Result<Volume> asEditableLabels(const Volume& v, const std::string& path) {
    if (v.pixelType() == PixelType::kUInt8 || v.pixelType() == PixelType::kUInt16) return v;
    double lo = std::numeric_limits<double>::max(), hi = std::numeric_limits<double>::lowest();
    bool integral = true;
    visitPixels(v, [&](const auto* d) {
        const int64_t n = v.geometry().voxelCount();
        for (int64_t i = 0; i < n; ++i) {
            const double x = static_cast<double>(d[i]);
            lo = std::min(lo, x);
            hi = std::max(hi, x);
            integral = integral && x == static_cast<double>(static_cast<int64_t>(x));
        }
    });
    if (v.geometry().voxelCount() == 0) lo = hi = 0;
    if (!integral || lo < 0 || hi > 65535)
        return unsupported(fmt::format("{} label map with values in [{}, {}]: labels must be "
                                       "whole numbers in [0, 65535]",
                                       pixelTypeName(v.pixelType()), lo, hi),
                           path);
    return v.castTo(hi <= 255 ? PixelType::kUInt8 : PixelType::kUInt16);
}

std::string recoveryKey(const std::string& source, const std::string& series_uid) {
    uint64_t h = 14695981039346656037ull;
    for (const char c : source + "\n" + series_uid) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return fmt::format("{:016x}", h);
}

std::optional<RecoveryInfo> findRecovery(const std::string& root, const std::string& source,
                                         const std::string& series_uid) {
    if (root.empty()) return std::nullopt;
    const fs::path folder = fs::path(root) / recoveryKey(source, series_uid);
    std::error_code ec;
    if (!fs::exists(folder / kJournal, ec) || !fs::exists(folder / kBase, ec)) return std::nullopt;
    auto info = readSessionFile(folder.string());
    if (!info.isOk()) {
        log::warning(kComponent, "recovery folder {} ignored: {}", folder.string(),
                     info.status().toString());
        return std::nullopt;
    }
    if (info->source != source || info->series_uid != series_uid) return std::nullopt;
    bool torn = false;
    auto lines = readJournal((folder / kJournal).string(), &torn);
    if (!lines.isOk()) {
        log::warning(kComponent, "recovery journal ignored: {}", lines.status().toString());
        return std::nullopt;
    }
    info->journal_lines = static_cast<int>(lines->size());
    if (info->journal_lines == 0) return std::nullopt;
    return std::move(info.value());
}

Status removeRecovery(const RecoveryInfo& info) {
    std::error_code ec;
    fs::remove_all(info.folder, ec);
    if (ec) return ioError("cannot remove the recovery folder: " + ec.message(), info.folder);
    return Status::ok();
}

EditSession::EditSession(EditSession&&) noexcept = default;
EditSession& EditSession::operator=(EditSession&&) noexcept = default;
EditSession::~EditSession() = default;

Result<EditSession> EditSession::start(const Volume& image, const Volume& labels,
                                       const std::vector<SegmentMeta>& segments,
                                       const SessionOptions& options) {
    EditSession s;
    VOXSEG_ASSIGN_OR_RETURN(auto editor, LabelEditor::create(image, labels, options.editor));
    s.editor_.emplace(std::move(editor));
    s.base_ = cloneVolume(labels);
    s.options_ = options;
    s.started_ = nowUtc();
    if (options.recovery_root.empty()) return s;
    const fs::path folder =
        fs::path(options.recovery_root) / recoveryKey(options.source, options.series_uid);
    std::error_code ec;
    fs::remove_all(folder, ec);
    fs::create_directories(folder, ec);
    if (ec)
        return ioError("cannot create the edit recovery folder: " + ec.message(), folder.string());
    s.folder_ = folder.string();
    // The journal is created only once base.nrrd is complete: a crash in between leaves no
    // journal, so nothing is offered for restore against a half-written base.
    VOXSEG_RETURN_IF_ERROR(io::writeImage(s.base_, (folder / kBase).string()));
    VOXSEG_RETURN_IF_ERROR(writeSessionFile(s.folder_, options, s.started_, segments));
    VOXSEG_ASSIGN_OR_RETURN(auto writer, JournalWriter::open((folder / kJournal).string(), true));
    s.writer_.emplace(std::move(writer));
    return s;
}

Result<EditSession> EditSession::restore(const Volume& image, const RecoveryInfo& info,
                                         const SessionOptions& options) {
    const fs::path folder(info.folder);
    VOXSEG_ASSIGN_OR_RETURN(Volume base, io::readImage((folder / kBase).string()));
    VOXSEG_ASSIGN_OR_RETURN(base, asEditableLabels(base, (folder / kBase).string()));
    EditSession s;
    VOXSEG_ASSIGN_OR_RETURN(auto editor, LabelEditor::create(image, base, options.editor));
    s.editor_.emplace(std::move(editor));
    s.base_ = base;
    s.options_ = options;
    s.started_ = info.started;
    s.folder_ = info.folder;
    const std::string journal = (folder / kJournal).string();
    bool torn = false;
    VOXSEG_ASSIGN_OR_RETURN(auto lines, readJournal(journal, &torn));
    VOXSEG_ASSIGN_OR_RETURN(
        auto report, applyJournalLines(lines, *s.editor_, journal, [&s] { s.noteLineStep(); }));
    if (torn) {
        // Rewrite the journal without the torn line so appends start on a line of their own.
        std::string text;
        for (const JournalLine& l : lines) text += toJsonLine(l.op) + "\n";
        VOXSEG_RETURN_IF_ERROR(writeFileAtomically(journal, text));
        log::info(kComponent, "{}: the last, incomplete line (a stroke being drawn) was dropped",
                  journal);
    }
    s.journal_lines_ = static_cast<int>(lines.size());
    s.dirty_ = s.journal_lines_ > 0;
    log::info(kComponent, "restored {} edits ({} voxels changed) from {}", report.ops_applied,
              report.voxels_changed, info.folder);
    VOXSEG_ASSIGN_OR_RETURN(auto writer, JournalWriter::open(journal));
    s.writer_.emplace(std::move(writer));
    return s;
}

void EditSession::noteLineStep() {
    const uint64_t now = editor_->lastAppliedId();
    line_steps_.push_back(now != last_step_ ? now : 0);
    last_step_ = now;
}

Status EditSession::journal(const EditOp& op) {
    dirty_ = true;
    if (!writer_) return Status::ok();
    VOXSEG_RETURN_IF_ERROR(writer_->append(op));
    ++journal_lines_;
    noteLineStep();
    return Status::ok();
}

Result<ApplyReport> EditSession::apply(const EditOp& op) {
    if (inStroke()) VOXSEG_RETURN_IF_ERROR(endStroke());
    VOXSEG_ASSIGN_OR_RETURN(ApplyReport r, editor_->apply(op));
    VOXSEG_RETURN_IF_ERROR(journal(op));
    return r;
}

Result<ApplyReport> EditSession::undo() {
    EditOp op;
    op.kind = OpKind::kUndo;
    return apply(op);
}

Result<ApplyReport> EditSession::redo() {
    EditOp op;
    op.kind = OpKind::kRedo;
    return apply(op);
}

Result<ApplyReport> EditSession::beginStroke(const EditOp& op) {
    if (inStroke()) VOXSEG_RETURN_IF_ERROR(endStroke());
    if ((op.kind != OpKind::kPaint && op.kind != OpKind::kErase) || op.points.size() != 1)
        return invalidArgument("a stroke starts with one paint or erase point");
    VOXSEG_ASSIGN_OR_RETURN(ApplyReport r, editor_->apply(op));
    stroke_op_ = op;
    stroke_op_.stroke = true;
    stroke_steps_ = 1;
    return r;
}

Result<ApplyReport> EditSession::extendStroke(const Vec3& p) {
    if (!inStroke()) return Status(StatusCode::kFailedPrecondition, "no stroke to extend");
    EditOp segment = stroke_op_;
    Vec3 point = p;
    if (stroke_op_.shape == Shape::kDisk) {
        // A disk stroke lies in its first point's slice (as one stroke_mm op paints it): each
        // point is moved into that slice, so segment by segment paints what the line replays.
        const detail::Grid grid(editor_->geometry());
        const int axis = grid.sliceAxis(stroke_op_.plane);
        Vec3 idx = grid.index(p);
        idx[axis] = std::round(grid.index(stroke_op_.points.front())[axis]);
        point = grid.physical(idx[0], idx[1], idx[2]);
    }
    segment.points = {stroke_op_.points.back(), point};
    VOXSEG_ASSIGN_OR_RETURN(ApplyReport r, editor_->apply(segment));
    stroke_op_.points.push_back(point);
    // Folded as it goes so a long stroke never pushes older steps out of the bounded history.
    if (++stroke_steps_ >= 32) {
        VOXSEG_RETURN_IF_ERROR(editor_->mergeLast(stroke_steps_, stroke_op_));
        stroke_steps_ = 1;
    }
    return r;
}

Status EditSession::endStroke() {
    if (!inStroke()) return Status::ok();
    const int steps = stroke_steps_;
    stroke_steps_ = 0;
    VOXSEG_RETURN_IF_ERROR(editor_->mergeLast(steps, stroke_op_));
    return journal(stroke_op_);
}

Status EditSession::saveSegments(const std::vector<SegmentMeta>& segments) {
    if (folder_.empty()) return Status::ok();
    return writeSessionFile(folder_, options_, started_, segments);
}

Status EditSession::discardRecovery() {
    writer_.reset();
    if (folder_.empty()) return Status::ok();
    RecoveryInfo info;
    info.folder = folder_;
    folder_.clear();
    return removeRecovery(info);
}

}  // namespace voxseg::edit
