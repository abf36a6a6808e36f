// One multi-planar view (axial, coronal or sagittal) of a ViewerState: the windowed slice with
// the label overlay, the linked crosshair, orientation letters, slice number and window. Pixels
// come from ui/mpr_slice.h and are cached per slice, so a repaint that does not change the slice
// only scales a QImage. Mouse: left = move the crosshair, right drag = window/level, middle or
// Shift+left drag = pan, wheel = slice, Ctrl+wheel = zoom, left double-click = maximizeRequested
// (the crosshair its first click moved goes back). A left click that takes the keyboard
// focus from a field or the label table only focuses the view (the crosshair stays). An edit
// tool's preview (EditController::preview) is drawn over the slice. Keys:
// Up/Down/PageUp/PageDown/Home/End = slice, +/- = zoom, R = reset zoom and pan. Drawing is in
// logical coordinates (HiDPI-safe: QPainter scales to device pixels; lines are cosmetic). GUI
// thread only.
#pragma once

#include "core/geometry.h"
#include "ui/mpr_slice.h"

#include <QElapsedTimer>
#include <QImage>
#include <QPointF>
#include <QWidget>

#include <array>
#include <optional>

namespace voxseg::ui {

class ViewerState;
class EditController;
class MeasureTool;
class SegmentationComparison;

class MprView : public QWidget {
    Q_OBJECT

  public:
    MprView(ViewerState* state, ViewAxis axis, QWidget* parent = nullptr);

    ViewAxis axis() const { return axis_; }
    // Edit tools: with a tool selected, left click/drag goes to the controller (paint, erase,
    // grow, ...) instead of moving the crosshair, Shift+wheel changes the brush radius, and the
    // brush outline is drawn under the mouse (and its sphere's cut in the other views). With
    // the Interactive tool, left and right clicks and drags are prompts (Shift+left or right:
    // exclude), and the box / scribble / lasso being dragged is drawn.
    void setEditController(EditController* controller);
    // Measurements (ui/measure_tool.h) are drawn over the slice; with a measure tool chosen, a
    // left drag draws one (or, on one shown here, selects it and drags its end).
    void setMeasureTool(MeasureTool* tool);
    // A second segmentation's contours (ui/segmentation_comparison.h) are drawn over the slice.
    void setComparison(SegmentationComparison* comparison);
    double zoom() const { return zoom_; }
    void setZoom(double zoom);
    void resetView();
    // Bilinear (true, default) or nearest-neighbour magnification.
    void setSmooth(bool smooth);
    // Off: read every slice straight from the volume (the bench compares both; see SlabCache).
    void setUseSlabCache(bool on) {
        use_slab_cache_ = on;
        if (!on) slab_.clear();
    }
    const SlabCache& slabCache() const { return slab_; }

    // Where image pixel (column, row) centre lands in widget coordinates, and back.
    QPointF widgetPointOfPixel(double column, double row) const;
    std::optional<std::array<int64_t, 3>> voxelAt(const QPointF& widget_point) const;
    // The patient point (LPS mm) under a widget point, on the plane of the shown slice
    // (continuous, not snapped to a voxel centre); nullopt outside the image.
    std::optional<Vec3> patientPointAt(const QPointF& widget_point) const;
    // Where a patient point lands: widget x, y and its signed distance from the shown slice's
    // plane (mm).
    QPointF widgetPointOfPatient(const Vec3& point_mm, double* plane_distance_mm = nullptr) const;
    // Label repaints after edits (tests: an edit must repaint each view exactly once).
    int labelRepaints() const { return label_repaints_; }
    // Pixels of the shown slice the edit preview covers (0 without one); the overlay drawn.
    int previewPixels();
    const QImage& previewImage();
    // Whether the mouse is over this view (keys of the views go to it: MainWindow).
    bool mouseOver() const { return mouse_over_; }

    // The rendered slice (image + overlay) at its native size; for tests and screenshots.
    const QImage& sliceImage();
    // Paint events handled so far (benchmarks wait for the next one).
    int paintCount() const { return paint_count_; }

  signals:
    // The voxel under the mouse (for the status bar); nullopt when outside the image.
    void hovered(std::optional<std::array<int64_t, 3>> voxel);
    // A left double-click without an edit tool: maximise this view, or restore the layout.
    void maximizeRequested();

  protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void leaveEvent(QEvent* event) override;
    void enterEvent(QEnterEvent* event) override;
    void focusInEvent(QFocusEvent* event) override;

  private:
    enum class Drag { kNone, kCrosshair, kWindow, kPan, kEdit, kMeasure };
    QRectF imageRect() const;  // where the slice is drawn, widget coordinates
    // Continuous image (column, row) under a widget point; nullopt outside the image.
    std::optional<QPointF> pixelAt(const QPointF& widget_point) const;
    void invalidate();
    void onCursorChanged();
    void render();
    void moveCrosshairTo(const QPointF& p);
    void onLabelVoxelsChanged(const IndexBox& box);
    void drawBrush(QPainter& p);
    void drawPreview(QPainter& p);
    void drawPrompt(QPainter& p);  // the Interactive tool's box / scribble / lasso being dragged
    void updateCursorShape();

    ViewerState* state_;
    EditController* edit_ = nullptr;
    MeasureTool* measure_ = nullptr;
    SegmentationComparison* comparison_ = nullptr;
    int label_repaints_ = 0;
    ViewAxis axis_;
    QImage image_;
    SlabCache slab_;
    bool use_slab_cache_ = true;
    bool dirty_ = true;
    int64_t rendered_slice_ = -1;
    double zoom_ = 1.0;
    QPointF pan_{0, 0};
    bool smooth_ = true;
    int paint_count_ = 0;
    Drag drag_ = Drag::kNone;
    QPointF drag_start_;
    QPointF pan_start_;
    WindowLevel window_start_;
    bool mouse_over_ = false;
    bool mouse_focus_ = false;  // focus just came by a mouse press
    bool focus_click_ = false;  // the next left press only took the focus
    // The crosshair before the first left press of a (double-)click, and when and where that
    // press was: a double-click puts the crosshair back.
    std::optional<std::array<int64_t, 3>> cursor_before_click_;
    QElapsedTimer left_press_clock_;
    QPointF left_press_at_;
    QImage preview_image_;
    int preview_pixels_ = 0;
    std::pair<int, int64_t> preview_key_{-1, -1};  // generation, slice of preview_image_
};

}  // namespace voxseg::ui
