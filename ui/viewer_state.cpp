#include "ui/viewer_state.h"

#include "core/label_colors.h"
#include "core/log.h"
#include "pipeline/orientation.h"

#include <algorithm>

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "viewer";

}  // namespace

ViewerState::ViewerState(QObject* parent) : QObject(parent) {}

void ViewerState::setStudy(pipeline::StudyInput study, const QString& source) {
    study_ = std::move(study);
    source_ = source;
    label_map_ = Volume();
    label_runs_ = {};
    label_bounds_ = {};
    entries_.clear();
    segments_.clear();
    statistics_ = {};
    colors_ = {};
    const Geometry g = study_.volume.geometry();
    for (int v = 0; v < 3; ++v) frames_[v] = makeSliceFrame(g, static_cast<ViewAxis>(v));
    cursor_ = {g.size[0] / 2, g.size[1] / 2, g.size[2] / 2};
    cursor_outside_ = false;
    window_ = defaultWindow(study_.volume);
    emit imageChanged();
    emit labelMapChanged();
    emit windowChanged();
    emit cursorChanged();
}

Result<PreparedLabelMap> prepareLabelMap(const Volume& image, Volume label_map,
                                         std::vector<LabelInfo> labels,
                                         std::vector<io::SegmentDescription> segments) {
    if (image.empty()) return Status(StatusCode::kFailedPrecondition, "open an image first");
    const Geometry img = image.geometry(), lab = label_map.geometry();
    auto dims = [](const Geometry& g) {
        return std::to_string(g.size[0]) + "x" + std::to_string(g.size[1]) + "x" +
               std::to_string(g.size[2]);
    };
    if (img.size != lab.size || !lab.approxEqual(img, 1e-3, 1e-4, 1e-4)) {
        // The same voxels stored in another axis order (a LAS NIfTI label map of an LPS DICOM
        // series): permute/flip exactly onto the image's grid.
        auto mapping = pipeline::orientationMapping(lab, img.orientationCode());
        if (mapping.isOk() && !mapping->isIdentity()) {
            const Geometry mapped = pipeline::mapGeometry(lab, *mapping);
            if (mapped.size == img.size && mapped.approxEqual(img, 1e-3, 1e-4, 1e-4)) {
                log::info(kComponent, "label map reoriented from {} to {} (exact permutation)",
                          lab.orientationCode(), img.orientationCode());
                label_map = pipeline::applyAxisMapping(label_map, *mapping);
            }
        }
    }
    const Geometry fitted = label_map.geometry();
    if (img.size != fitted.size)
        return invalidArgument("label map is " + dims(lab) + " but the image is " + dims(img) +
                                   "; load a label map made on this image's grid",
                               label_map.info().source);
    if (!fitted.approxEqual(img, 1e-3, 1e-4, 1e-4))
        return invalidArgument(
            "label map grid (origin, spacing or direction) differs from the image's; load a "
            "label map made on this image's grid",
            label_map.info().source);
    if (label_map.pixelType() == PixelType::kFloat32 ||
        label_map.pixelType() == PixelType::kFloat64)
        label_map = label_map.castTo(PixelType::kInt32);
    PreparedLabelMap out;
    VOXSEG_ASSIGN_OR_RETURN(out.statistics, pipeline::computeStatistics(label_map, &image, labels));
    out.runs = buildLabelRuns(label_map, labelRunAxis(label_map.geometry()));
    out.label_map = std::move(label_map);
    out.labels = std::move(labels);
    out.segments = std::move(segments);
    return out;
}

Status ViewerState::setLabelMap(Volume label_map, std::vector<LabelInfo> labels,
                                std::vector<io::SegmentDescription> segments) {
    VOXSEG_ASSIGN_OR_RETURN(auto prepared, prepareLabelMap(study_.volume, std::move(label_map),
                                                           std::move(labels), std::move(segments)));
    applyLabelMap(std::move(prepared));
    return Status::ok();
}

void ViewerState::applyLabelMap(PreparedLabelMap p) {
    label_map_ = std::move(p.label_map);
    label_runs_ = std::move(p.runs);
    statistics_ = std::move(p.statistics);
    segments_ = std::move(p.segments);
    entries_.clear();
    for (const auto& s : statistics_.labels) {
        LabelEntry e;
        e.value = s.label;
        e.name = s.name.empty() ? pipeline::labelName(p.labels, s.label) : s.name;
        e.voxels = s.voxels;
        e.volume_ml = s.volume_ml;
        for (const auto& d : segments_)
            if (d.value == s.label) {
                e.category = d.category;
                e.type = d.type;
                e.algorithm_type = d.algorithm_type;
            }
        e.auto_color = std::none_of(p.labels.begin(), p.labels.end(),
                                    [&](const LabelInfo& l) { return l.value == s.label; });
        e.color = pipeline::labelColor(p.labels, s.label);
        entries_.push_back(std::move(e));
    }
    // A described label keeps its colour; the others get their type's standard colour or the
    // palette colour farthest from those given so far (pipeline's 8 colours repeat: labels 5
    // and 53 of TotalSegmentator were the same salmon).
    std::vector<Rgb> used;
    for (const auto& e : entries_)
        if (!e.auto_color) used.push_back(e.color);
    for (auto& e : entries_) {
        if (!e.auto_color) continue;
        e.color = defaultLabelColor(e, used);
        used.push_back(e.color);
    }
    updateBounds();
    log::info(kComponent, "label map with {} labels shown ({} runs, {:.1f} MB, for the {} view)",
              entries_.size(), label_runs_.runs.size(), label_runs_.bytes() / 1e6,
              label_runs_.empty() ? "no"
                                  : viewAxisName(frames_[0].axis_n == 0   ? ViewAxis::kAxial
                                                 : frames_[1].axis_n == 0 ? ViewAxis::kCoronal
                                                                          : ViewAxis::kSagittal));
    rebuildColors();
    emit labelMapChanged();
    emit labelDisplayChanged();
}

void ViewerState::clearLabelMap() {
    label_map_ = Volume();
    label_runs_ = {};
    label_bounds_ = {};
    entries_.clear();
    segments_.clear();
    statistics_ = {};
    colors_ = {};
    emit labelMapChanged();
    emit labelDisplayChanged();
}

std::vector<LabelInfo> ViewerState::labelInfos() const {
    return {entries_.begin(), entries_.end()};
}

std::vector<io::SegmentDescription> ViewerState::segmentDescriptions() const {
    std::vector<io::SegmentDescription> out;
    for (const edit::SegmentMeta& m : segmentMetas()) {
        io::SegmentDescription d = edit::toSegmentDescription(m);
        for (const auto& s : segments_)
            if (s.value == m.value) d.algorithm_name = s.algorithm_name;
        out.push_back(std::move(d));
    }
    return out;
}

std::vector<edit::SegmentMeta> ViewerState::segmentMetas() const {
    std::vector<edit::SegmentMeta> out;
    for (const auto& e : entries_) {
        edit::SegmentMeta m{e};  // the label part
        m.status = e.status;
        m.algorithm_type = e.algorithm_type;
        out.push_back(std::move(m));
    }
    return out;
}

void ViewerState::applySegmentMetas(const std::vector<edit::SegmentMeta>& metas) {
    for (const auto& m : metas) {
        int row = rowOfLabel(m.value);
        if (row < 0) {
            entries_.push_back({});
            entries_.back().value = m.value;
            row = static_cast<int>(entries_.size()) - 1;
        }
        LabelEntry& e = entries_[static_cast<size_t>(row)];
        if (m.color != e.color) e.auto_color = false;
        static_cast<LabelInfo&>(e) = m;  // value, name, colour, codes
        e.status = m.status;
        e.algorithm_type = m.algorithm_type;
    }
    std::sort(entries_.begin(), entries_.end(),
              [](const LabelEntry& a, const LabelEntry& b) { return a.value < b.value; });
    rebuildColors();
    emit labelTableChanged();
    emit labelDisplayChanged();
}

int ViewerState::rowOfLabel(int value) const {
    for (size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].value == value) return static_cast<int>(i);
    return -1;
}

size_t ViewerState::addLabel(const std::string& name) {
    int value = 1;
    while (rowOfLabel(value) >= 0) ++value;
    LabelEntry e;
    e.value = value;
    e.name = name.empty() ? "label " + std::to_string(value) : name;
    e.color = nextLabelColor();
    e.auto_color = true;
    entries_.push_back(e);
    std::sort(entries_.begin(), entries_.end(),
              [](const LabelEntry& a, const LabelEntry& b) { return a.value < b.value; });
    rebuildColors();
    emit labelTableChanged();
    emit labelDisplayChanged();
    return static_cast<size_t>(rowOfLabel(value));
}

void ViewerState::renameLabel(size_t row, const std::string& name) {
    if (row >= entries_.size() || name.empty() || entries_[row].name == name) return;
    entries_[row].name = name;
    emit labelTableChanged();
}

void ViewerState::setLabelCodes(size_t row, const CodedConcept& category,
                                const CodedConcept& type) {
    if (row >= entries_.size()) return;
    LabelEntry& e = entries_[row];
    e.category = category;
    e.type = type;
    if (e.auto_color) {
        if (auto c = standardColor(type, e.type_modifier); c && *c != e.color) {
            e.color = *c;
            for (auto& s : segments_)
                if (s.value == e.value) s.color = *c;
            rebuildColors();
            emit labelDisplayChanged();
        }
    }
    emit labelTableChanged();
}

void ViewerState::setLabelStatus(size_t row, edit::ReviewStatus status) {
    if (row >= entries_.size() || entries_[row].status == status) return;
    entries_[row].status = status;
    emit labelTableChanged();
}

void ViewerState::removeLabel(size_t row) {
    if (row >= entries_.size()) return;
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(row));
    rebuildColors();
    emit labelTableChanged();
    emit labelDisplayChanged();
}

void ViewerState::beginEditing(const Volume& label_map) {
    const bool was_empty = label_map_.empty();
    label_map_ = label_map;
    // Runs go stale with the first edit; slices are drawn from the volume until the next
    // refreshStatistics().
    label_runs_ = {};
    if (was_empty) emit labelMapChanged();
    emit labelDisplayChanged();
}

void ViewerState::labelVoxelsEdited(const edit::ApplyReport& report) {
    if (!report.changedAnything()) return;
    if (label_bounds_.empty()) {
        label_bounds_.lo = report.box_lo;
        label_bounds_.hi = report.box_hi;
    } else {
        for (int a = 0; a < 3; ++a) {
            label_bounds_.lo[a] = std::min(label_bounds_.lo[a], report.box_lo[a]);
            label_bounds_.hi[a] = std::max(label_bounds_.hi[a], report.box_hi[a]);
        }
    }
    for (int v : report.labels) {
        if (v == 0) continue;
        IndexBox& b = label_boxes_[v];
        if (b.empty()) b = {report.box_lo, report.box_hi};
        for (int a = 0; a < 3; ++a) {
            b.lo[a] = std::min(b.lo[a], report.box_lo[a]);
            b.hi[a] = std::max(b.hi[a], report.box_hi[a]);
        }
    }
    label_runs_ = {};
    bool added = false;
    for (int v : report.labels) {
        if (v == 0 || rowOfLabel(v) >= 0) continue;
        LabelEntry e;
        e.value = v;
        e.name = "label " + std::to_string(v);
        e.color = nextLabelColor();
        e.auto_color = true;
        entries_.push_back(std::move(e));
        added = true;
    }
    if (added) {
        std::sort(entries_.begin(), entries_.end(),
                  [](const LabelEntry& a, const LabelEntry& b) { return a.value < b.value; });
        rebuildColors();
        emit labelTableChanged();
    }
    IndexBox box;
    box.lo = report.box_lo;
    box.hi = report.box_hi;
    emit labelVoxelsChanged(box, report.labels);
}

Result<ViewerState::LabelSummary> ViewerState::summarizeLabels(
    const Volume& label_map, const Volume& image, const std::vector<LabelInfo>& labels) {
    LabelSummary out;
    VOXSEG_ASSIGN_OR_RETURN(out.statistics, pipeline::computeStatistics(label_map, &image, labels));
    out.runs = buildLabelRuns(label_map, labelRunAxis(label_map.geometry()));
    return out;
}

void ViewerState::refreshStatistics() {
    if (label_map_.empty()) return;
    auto summary = summarizeLabels(label_map_, study_.volume, labelInfos());
    if (!summary.isOk()) {
        log::warning(kComponent, "statistics not recomputed: {}", summary.status().toString());
        return;
    }
    applyLabelSummary(std::move(summary.value()));
}

void ViewerState::applyLabelSummary(LabelSummary summary) {
    statistics_ = std::move(summary.statistics);
    for (auto& e : entries_) {
        e.voxels = 0;
        e.volume_ml = 0;
        for (const auto& l : statistics_.labels)
            if (l.label == e.value) {
                e.voxels = l.voxels;
                e.volume_ml = l.volume_ml;
            }
    }
    updateBounds();
    label_runs_ = std::move(summary.runs);
    emit labelTableChanged();
}

IndexBox ViewerState::labelBox(int value) const {
    auto it = label_boxes_.find(value);
    return it == label_boxes_.end() ? IndexBox{} : it->second;
}

void ViewerState::updateBounds() {
    label_bounds_ = {{INT64_MAX, INT64_MAX, INT64_MAX}, {-1, -1, -1}};
    label_boxes_.clear();
    for (const auto& l : statistics_.labels) {
        if (l.voxels == 0) continue;
        label_boxes_[l.label] = {l.bbox_min, l.bbox_max};
        for (int a = 0; a < 3; ++a) {
            label_bounds_.lo[a] = std::min(label_bounds_.lo[a], l.bbox_min[a]);
            label_bounds_.hi[a] = std::max(label_bounds_.hi[a], l.bbox_max[a]);
        }
    }
}

void ViewerState::rebuildColors() {
    colors_ = {};
    for (const auto& e : entries_) colors_.set(e.value, e.color, e.opacity, e.visible);
}

void ViewerState::setLabelVisible(size_t row, bool visible) {
    if (row >= entries_.size() || entries_[row].visible == visible) return;
    entries_[row].visible = visible;
    rebuildColors();
    emit labelDisplayChanged();
}

void ViewerState::setLabelOpacity(size_t row, double opacity) {
    if (row >= entries_.size()) return;
    entries_[row].opacity = std::clamp(opacity, 0.0, 1.0);
    rebuildColors();
    emit labelDisplayChanged();
}

void ViewerState::setLabelColor(size_t row, std::array<uint8_t, 3> rgb) {
    if (row >= entries_.size()) return;
    entries_[row].color = rgb;
    entries_[row].auto_color = false;  // the reader's choice
    // Exported SEG segments carry the colour too.
    for (auto& s : segments_)
        if (s.value == entries_[row].value) s.color = rgb;
    rebuildColors();
    emit labelDisplayChanged();
}

void ViewerState::setAllLabelsVisible(bool visible) {
    for (auto& e : entries_) e.visible = visible;
    rebuildColors();
    emit labelDisplayChanged();
}

void ViewerState::setOverlayMode(OverlayMode mode) {
    if (mode == overlay_mode_) return;
    overlay_mode_ = mode;
    emit labelDisplayChanged();
}

void ViewerState::setCursor(std::array<int64_t, 3> voxel) {
    if (!hasImage()) return;
    const Geometry g = study_.volume.geometry();
    for (int a = 0; a < 3; ++a) voxel[a] = std::clamp<int64_t>(voxel[a], 0, g.size[a] - 1);
    if (voxel == cursor_ && !cursor_outside_) return;
    cursor_ = voxel;
    cursor_outside_ = false;
    emit cursorChanged();
}

void ViewerState::setCursorOutside(bool outside) {
    if (outside == cursor_outside_) return;
    cursor_outside_ = outside;
    emit cursorChanged();
}

void ViewerState::swapDocument(ViewerState& other) {
    std::swap(study_, other.study_);
    std::swap(source_, other.source_);
    std::swap(frames_, other.frames_);
    std::swap(label_map_, other.label_map_);
    std::swap(entries_, other.entries_);
    std::swap(segments_, other.segments_);
    std::swap(statistics_, other.statistics_);
    std::swap(label_bounds_, other.label_bounds_);
    std::swap(label_boxes_, other.label_boxes_);
    std::swap(label_runs_, other.label_runs_);
    std::swap(colors_, other.colors_);
    std::swap(overlay_mode_, other.overlay_mode_);
    std::swap(cursor_, other.cursor_);
    std::swap(cursor_outside_, other.cursor_outside_);
    std::swap(window_, other.window_);
    for (ViewerState* s : {this, &other}) {
        emit s->imageChanged();
        emit s->labelMapChanged();
        emit s->labelDisplayChanged();
        emit s->windowChanged();
        emit s->cursorChanged();
    }
}

QString ViewerState::title() const {
    if (const auto& series = study_.series) {
        QString t = QString::fromStdString(series->modality);
        if (!series->description.empty()) t += "  " + QString::fromStdString(series->description);
        return t + QString("  #%1").arg(series->series_number);
    }
    const QString name = source_.section('/', -1);
    return name.isEmpty() ? source_ : name;
}

void ViewerState::setSlice(ViewAxis view, int64_t slice) {
    auto c = cursor_;
    c[frame(view).axis_n] = slice;
    setCursor(c);
}

void ViewerState::setWindow(WindowLevel window) {
    window.width = std::max(window.width, 1e-3);
    if (window.width == window_.width && window.level == window_.level) return;
    window_ = window;
    emit windowChanged();
}

bool ViewerState::inside(const std::array<int64_t, 3>& v) const {
    if (!hasImage()) return false;
    const Geometry g = study_.volume.geometry();
    for (int a = 0; a < 3; ++a)
        if (v[a] < 0 || v[a] >= g.size[a]) return false;
    return true;
}

double ViewerState::imageValue(const std::array<int64_t, 3>& v) const {
    if (!inside(v)) return 0.0;
    const Geometry g = study_.volume.geometry();
    const int64_t idx = (v[2] * g.size[1] + v[1]) * g.size[0] + v[0];
    return visitPixels(study_.volume, [&](const auto* p) { return static_cast<double>(p[idx]); });
}

int ViewerState::labelValue(const std::array<int64_t, 3>& v) const {
    if (!inside(v) || label_map_.empty()) return 0;
    const Geometry g = label_map_.geometry();
    const int64_t idx = (v[2] * g.size[1] + v[1]) * g.size[0] + v[0];
    return visitPixels(label_map_, [&](const auto* p) { return static_cast<int>(p[idx]); });
}

std::array<uint8_t, 3> ViewerState::nextLabelColor() const {
    std::vector<Rgb> used;
    for (const auto& e : entries_) used.push_back(e.color);
    return distinctColor(used);
}

std::string ViewerState::labelName(int value) const {
    if (value == 0) return {};
    for (const auto& e : entries_)
        if (e.value == value) return e.name;
    return "label " + std::to_string(value);
}

}  // namespace voxseg::ui
