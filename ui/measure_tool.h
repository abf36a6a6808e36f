// The viewer's measurements: rulers (distance in mm), ellipse ROIs on a slice and sphere ROIs
// with the image's mean, SD, min, max, area or volume and voxel count (edit/roi_stats.h, in the
// image's units: HU for CT). Points are patient LPS mm from MprView::patientPointAt, so a tilted
// or anisotropic image gives true millimetres. A ruler or ellipse belongs to the slice it was
// drawn on (shown only there, ui/measure_overlay.h); a sphere is shown wherever a view's plane
// cuts it. Several per view; the last one drawn (or clicked) is selected and removeSelected()
// (Delete) removes it. Opening another image clears them. The mouse comes from the views while a
// measure tool is chosen (ui/measure_toolbar.h: M ruler, I ellipse, Shift+I sphere); the tool
// and the edit tools exclude each other (MainWindow). GUI thread only.
#pragma once

#include "core/geometry.h"
#include "edit/roi_stats.h"
#include "ui/mpr_slice.h"

#include <QObject>
#include <QString>

#include <vector>

namespace voxseg::ui {

class ViewerState;

enum class MeasureKind { kNone, kRuler, kEllipse, kSphere };
const char* measureKindName(MeasureKind kind);  // "ruler", "ellipse", "sphere"

struct Measurement {
    MeasureKind kind = MeasureKind::kRuler;
    ViewAxis view = ViewAxis::kAxial;  // drawn in
    int slice_axis = 2;                // the view's through-plane index axis, and its slice
    int64_t slice = 0;
    // Ruler: its ends; ellipse: opposite corners of its bounding box (in the view's axes);
    // sphere: the centre and a point on the surface. LPS mm, on the slice's plane.
    Vec3 a_mm{0, 0, 0};
    Vec3 b_mm{0, 0, 0};
    double length_mm = 0.0;    // ruler
    edit::EllipseRoi ellipse;  // ellipse
    edit::SphereRoi sphere;    // sphere
    edit::RoiStatistics stats;
    bool has_stats = false;  // ROI statistics computed (a sphere: when its drag ends)
};

class MeasureTool : public QObject {
    Q_OBJECT

  public:
    explicit MeasureTool(ViewerState* state, QObject* parent = nullptr);
    ViewerState* state() const { return state_; }

    MeasureKind tool() const { return tool_; }
    void setTool(MeasureKind kind);

    const std::vector<Measurement>& measurements() const { return items_; }
    int selected() const { return selected_; }  // -1: none
    void select(int index);
    bool removeSelected();
    void clear();
    // Adds a finished measurement of `kind` from a to b in `view` (its slice: the view's
    // current one); returns its index. What a drag does, for scripts and tests.
    int add(MeasureKind kind, ViewAxis view, const Vec3& a_mm, const Vec3& b_mm);

    // Mouse, from a view (points LPS mm on its shown slice). press: on `hit` (>= 0, an existing
    // measurement shown in the view) selects it, and `handle` 0 / 1 drags its point a / b;
    // elsewhere it starts a new measurement of tool(). false: nothing taken.
    bool press(ViewAxis view, const Vec3& point_mm, int hit = -1, int handle = -1);
    void drag(const Vec3& point_mm);
    void release();
    bool dragging() const { return drag_index_ >= 0; }

    // "23.4 mm"; "mean 41.2 HU, SD 3.1, min 20, max 61 / area 153.9 mm² / 190 voxels".
    QString describe(int index) const;
    // The image's unit: "HU" for CT, else "".
    QString unit() const;

  signals:
    void toolChanged();
    void changed();  // a measurement added, moved, removed or selected

  private:
    void update(Measurement& m, bool with_sphere_stats);

    ViewerState* state_;
    MeasureKind tool_ = MeasureKind::kNone;
    std::vector<Measurement> items_;
    int selected_ = -1;
    int drag_index_ = -1;
    int drag_handle_ = 1;
};

}  // namespace voxseg::ui
