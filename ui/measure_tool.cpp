#include "ui/measure_tool.h"

#include "core/log.h"
#include "ui/viewer_state.h"

#include <cmath>

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "viewer.measure";

Vec3 minus(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
Vec3 scaled(const Vec3& v, double s) { return {v[0] * s, v[1] * s, v[2] * s}; }

QString number(double x) { return QString::number(x, 'f', std::abs(x) >= 100 ? 0 : 1); }

}  // namespace

const char* measureKindName(MeasureKind kind) {
    switch (kind) {
        case MeasureKind::kRuler:
            return "ruler";
        case MeasureKind::kEllipse:
            return "ellipse";
        case MeasureKind::kSphere:
            return "sphere";
        case MeasureKind::kNone:
            break;
    }
    return "none";
}

MeasureTool::MeasureTool(ViewerState* state, QObject* parent) : QObject(parent), state_(state) {
    // Measurements belong to the image they were drawn on.
    connect(state_, &ViewerState::imageChanged, this, &MeasureTool::clear);
}

void MeasureTool::setTool(MeasureKind kind) {
    if (kind == tool_) return;
    if (dragging()) release();
    tool_ = kind;
    emit toolChanged();
}

void MeasureTool::select(int index) {
    if (index < -1 || index >= static_cast<int>(items_.size())) return;
    selected_ = index;
    emit changed();
}

bool MeasureTool::removeSelected() {
    if (selected_ < 0 || selected_ >= static_cast<int>(items_.size())) return false;
    items_.erase(items_.begin() + selected_);
    drag_index_ = -1;
    selected_ = items_.empty() ? -1 : static_cast<int>(items_.size()) - 1;
    emit changed();
    return true;
}

void MeasureTool::clear() {
    items_.clear();
    selected_ = drag_index_ = -1;
    emit changed();
}

int MeasureTool::add(MeasureKind kind, ViewAxis view, const Vec3& a_mm, const Vec3& b_mm) {
    if (kind == MeasureKind::kNone || !state_->hasImage()) return -1;
    Measurement m;
    m.kind = kind;
    m.view = view;
    m.slice_axis = state_->frame(view).axis_n;
    m.slice = state_->slice(view);
    m.a_mm = a_mm;
    m.b_mm = b_mm;
    update(m, true);
    items_.push_back(m);
    selected_ = static_cast<int>(items_.size()) - 1;
    emit changed();
    return selected_;
}

bool MeasureTool::press(ViewAxis view, const Vec3& point_mm, int hit, int handle) {
    if (!state_->hasImage()) return false;
    if (hit >= 0 && hit < static_cast<int>(items_.size())) {
        selected_ = hit;
        drag_index_ = handle == 0 || handle == 1 ? hit : -1;
        drag_handle_ = handle;
        emit changed();
        return true;
    }
    if (tool_ == MeasureKind::kNone) return false;
    Measurement m;
    m.kind = tool_;
    m.view = view;
    m.slice_axis = state_->frame(view).axis_n;
    m.slice = state_->slice(view);
    m.a_mm = m.b_mm = point_mm;
    update(m, false);
    items_.push_back(m);
    selected_ = drag_index_ = static_cast<int>(items_.size()) - 1;
    drag_handle_ = 1;
    emit changed();
    return true;
}

void MeasureTool::drag(const Vec3& point_mm) {
    if (!dragging()) return;
    Measurement& m = items_[static_cast<size_t>(drag_index_)];
    (drag_handle_ == 0 ? m.a_mm : m.b_mm) = point_mm;
    update(m, false);  // a sphere's statistics wait for the release (a big one is slow)
    emit changed();
}

void MeasureTool::release() {
    if (!dragging()) return;
    const int index = drag_index_;
    drag_index_ = -1;
    Measurement& m = items_[static_cast<size_t>(index)];
    // A click without a drag makes nothing.
    if (norm(minus(m.b_mm, m.a_mm)) < 1e-6) {
        items_.erase(items_.begin() + index);
        selected_ = items_.empty() ? -1 : static_cast<int>(items_.size()) - 1;
    } else {
        update(m, true);
        log::info(kComponent, "{} {}: {}", measureKindName(m.kind), index + 1,
                  describe(index).toStdString());
    }
    emit changed();
}

void MeasureTool::update(Measurement& m, bool with_sphere_stats) {
    const Vec3 d = minus(m.b_mm, m.a_mm);
    m.length_mm = norm(d);
    m.has_stats = false;
    const Volume& image = state_->image();
    Result<edit::RoiStatistics> stats = edit::RoiStatistics{};
    switch (m.kind) {
        case MeasureKind::kRuler:
        case MeasureKind::kNone:
            return;
        case MeasureKind::kEllipse: {
            // The ellipse fills the box the drag spans along the view's screen axes (index axes
            // of the image, perpendicular in mm).
            const SliceFrame& f = state_->frame(m.view);
            const Geometry g = image.geometry();
            const Vec3 dx = g.axisDirection(f.axis_x), dy = g.axisDirection(f.axis_y);
            m.ellipse.slice_axis = m.slice_axis;
            m.ellipse.slice = m.slice;
            m.ellipse.centre_mm =
                scaled({m.a_mm[0] + m.b_mm[0], m.a_mm[1] + m.b_mm[1], m.a_mm[2] + m.b_mm[2]}, 0.5);
            m.ellipse.semi_axis_u_mm = scaled(dx, std::abs(dot(d, dx)) / 2);
            m.ellipse.semi_axis_v_mm = scaled(dy, std::abs(dot(d, dy)) / 2);
            stats = edit::ellipseStatistics(image, m.ellipse);
            break;
        }
        case MeasureKind::kSphere:
            m.sphere = {m.a_mm, m.length_mm};
            if (!with_sphere_stats) return;
            stats = edit::sphereStatistics(image, m.sphere);
            break;
    }
    if (!stats.isOk()) {
        log::warning(kComponent, "{} ROI: {}", measureKindName(m.kind), stats.status().toString());
        return;
    }
    m.stats = *stats;
    m.has_stats = true;
}

QString MeasureTool::unit() const {
    return state_->hasImage() && state_->image().info().modality == "CT" ? "HU" : "";
}

QString MeasureTool::describe(int index) const {
    if (index < 0 || index >= static_cast<int>(items_.size())) return {};
    const Measurement& m = items_[static_cast<size_t>(index)];
    if (m.kind == MeasureKind::kRuler) return QString("%1 mm").arg(m.length_mm, 0, 'f', 1);
    const QString size = m.kind == MeasureKind::kEllipse
                             ? QString("area %1 mm²").arg(m.stats.area_mm2, 0, 'f', 1)
                             : QString("volume %1 mL (r %2 mm)")
                                   .arg(m.sphere.radius_mm > 0 ? m.stats.volume_ml : 0.0, 0, 'f', 2)
                                   .arg(m.sphere.radius_mm, 0, 'f', 1);
    if (!m.has_stats) return m.kind == MeasureKind::kSphere ? size : QString();
    if (m.stats.voxels == 0) return size + " / no voxels";
    const QString u = unit().isEmpty() ? QString() : " " + unit();
    return QString("mean %1%2, SD %3, min %4, max %5 / %6 / %7 voxels")
        .arg(number(m.stats.mean), u, number(m.stats.sd), QString::number(m.stats.min),
             QString::number(m.stats.max), size)
        .arg(m.stats.voxels);
}

}  // namespace voxseg::ui
