#include "ui/mpr_view.h"

#include "ui/edit_controller.h"
#include "ui/interactive_tool.h"
#include "ui/measure_overlay.h"
#include "ui/measure_tool.h"
#include "ui/segmentation_comparison.h"
#include "ui/viewer_state.h"

#include <QApplication>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <map>

namespace voxseg::ui {
namespace {

constexpr double kMinZoom = 0.25, kMaxZoom = 32.0;

QColor crosshairColor(ViewAxis axis) {
    // The colour of the view whose plane the line shows (Slicer: axial red, sagittal yellow,
    // coronal green).
    switch (axis) {
        case ViewAxis::kAxial:
            return QColor(230, 80, 80);
        case ViewAxis::kCoronal:
            return QColor(90, 200, 90);
        case ViewAxis::kSagittal:
            return QColor(230, 210, 80);
    }
    return Qt::white;
}

}  // namespace

MprView::MprView(ViewerState* state, ViewAxis axis, QWidget* parent)
    : QWidget(parent), state_(state), axis_(axis) {
    setObjectName(QString("mpr_") + viewAxisName(axis));
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setMinimumSize(120, 120);
    setAttribute(Qt::WA_OpaquePaintEvent);
    connect(state_, &ViewerState::imageChanged, this, [this] {
        // A new image may reuse the old one's address: the slab must not be taken for its own.
        slab_.clear();
        resetView();
        invalidate();
    });
    connect(state_, &ViewerState::labelMapChanged, this, &MprView::invalidate);
    connect(state_, &ViewerState::labelDisplayChanged, this, &MprView::invalidate);
    connect(state_, &ViewerState::windowChanged, this, &MprView::invalidate);
    connect(state_, &ViewerState::cursorChanged, this, &MprView::onCursorChanged);
    connect(state_, &ViewerState::labelVoxelsChanged, this,
            [this](const IndexBox& box, const std::vector<int>&) { onLabelVoxelsChanged(box); });
    // A click that brings the focus back from a field or the table only focuses (focusChanged
    // comes after focusInEvent, with the widget that had the focus).
    connect(qApp, &QApplication::focusChanged, this, [this](QWidget* old, QWidget* now) {
        if (now != this) return;
        focus_click_ = mouse_focus_ && old && !qobject_cast<MprView*>(old);
        mouse_focus_ = false;
    });
}

void MprView::focusInEvent(QFocusEvent* e) {
    mouse_focus_ = e->reason() == Qt::MouseFocusReason;
    QWidget::focusInEvent(e);
}

void MprView::enterEvent(QEnterEvent* e) {
    mouse_over_ = true;
    QWidget::enterEvent(e);
}

void MprView::setEditController(EditController* controller) {
    edit_ = controller;
    connect(edit_, &EditController::brushChanged, this, qOverload<>(&QWidget::update));
    connect(edit_, &EditController::previewChanged, this, qOverload<>(&QWidget::update));
    connect(edit_, &EditController::toolChanged, this, &MprView::updateCursorShape);
}

void MprView::setMeasureTool(MeasureTool* tool) {
    measure_ = tool;
    connect(measure_, &MeasureTool::changed, this, qOverload<>(&QWidget::update));
    connect(measure_, &MeasureTool::toolChanged, this, &MprView::updateCursorShape);
}

void MprView::setComparison(SegmentationComparison* comparison) {
    comparison_ = comparison;
    connect(comparison_, &SegmentationComparison::changed, this, qOverload<>(&QWidget::update));
}

void MprView::updateCursorShape() {
    const bool tool = (edit_ && edit_->tool() != EditTool::kNone) ||
                      (measure_ && measure_->tool() != MeasureKind::kNone);
    setCursor(tool ? Qt::CrossCursor : Qt::ArrowCursor);
}

void MprView::onLabelVoxelsChanged(const IndexBox& box) {
    // Only a view whose slice crosses the changed box has new pixels.
    if (!state_->hasImage()) return;
    const int64_t s = state_->slice(axis_);
    const int n = state_->frame(axis_).axis_n;
    if (s < box.lo[n] || s > box.hi[n]) return;
    ++label_repaints_;
    invalidate();
}

std::optional<QPointF> MprView::pixelAt(const QPointF& p) const {
    if (!state_->hasImage()) return std::nullopt;
    const SliceFrame& f = state_->frame(axis_);
    const QRectF r = imageRect();
    if (r.isEmpty()) return std::nullopt;
    const double col = (p.x() - r.left()) / r.width() * static_cast<double>(f.width);
    const double row = (p.y() - r.top()) / r.height() * static_cast<double>(f.height);
    if (col < 0 || row < 0 || col >= static_cast<double>(f.width) ||
        row >= static_cast<double>(f.height))
        return std::nullopt;
    return QPointF(col, row);
}

std::optional<Vec3> MprView::patientPointAt(const QPointF& p) const {
    const auto px = pixelAt(p);
    if (!px) return std::nullopt;
    const SliceFrame& f = state_->frame(axis_);
    // Pixel c's centre is at c + 0.5; a flipped axis counts from the far edge.
    Vec3 idx{};
    idx[f.axis_x] = f.flip_x ? static_cast<double>(f.width) - px->x() - 0.5 : px->x() - 0.5;
    idx[f.axis_y] = f.flip_y ? static_cast<double>(f.height) - px->y() - 0.5 : px->y() - 0.5;
    idx[f.axis_n] = static_cast<double>(state_->slice(axis_));
    return state_->image().geometry().indexToPhysical(idx);
}

QPointF MprView::widgetPointOfPatient(const Vec3& point, double* plane_distance) const {
    const SliceFrame& f = state_->frame(axis_);
    const Vec3 idx = state_->image().geometry().physicalToIndex(point);
    const double col = f.flip_x ? static_cast<double>(f.width) - 1 - idx[f.axis_x] : idx[f.axis_x];
    const double row = f.flip_y ? static_cast<double>(f.height) - 1 - idx[f.axis_y] : idx[f.axis_y];
    if (plane_distance)
        *plane_distance = (idx[f.axis_n] - static_cast<double>(state_->slice(axis_))) * f.spacing_n;
    return widgetPointOfPixel(col, row);
}

void MprView::drawPrompt(QPainter& p) {
    if (!edit_ || edit_->tool() != EditTool::kInteractive) return;
    const Prompt* prompt = edit_->interactive()->drawingPrompt();
    if (!prompt || 2 - state_->frame(axis_).axis_n != prompt->slice_axis) return;
    const Geometry g = state_->image().geometry();
    QPolygonF line;
    for (const Point3& v : prompt->points)
        line << widgetPointOfPatient(g.indexToPhysical({v[2], v[1], v[0]}));
    QPen pen(prompt->include ? QColor(90, 220, 90) : QColor(230, 90, 90));
    pen.setCosmetic(true);
    p.setPen(pen);
    p.setBrush(Qt::NoBrush);
    if (prompt->kind == PromptKind::kBox)
        p.drawRect(QRectF(line.front(), line.back()).normalized());
    else if (prompt->kind == PromptKind::kLasso)
        p.drawPolygon(line);
    else
        p.drawPolyline(line);
}

void MprView::drawBrush(QPainter& p) {
    if (!edit_ || !edit_->showsBrush()) return;
    const SliceFrame& f = state_->frame(axis_);
    double d = 0;
    const QPointF c = widgetPointOfPatient(*edit_->brushCentre(), &d);
    const double r = edit_->radiusMm();
    double cut = 0;  // the brush's radius in this view's plane
    if (edit_->brushView() == axis_)
        cut = r;
    else if (edit_->sphere() && std::abs(d) < r)
        cut = std::sqrt(r * r - d * d);
    else
        return;  // a disk lies in the hovered view's plane only
    const QRectF ir = imageRect();
    const double px_per_mm_x = ir.width() / (static_cast<double>(f.width) * f.spacing_x);
    const double px_per_mm_y = ir.height() / (static_cast<double>(f.height) * f.spacing_y);
    QPen pen(edit_->tool() == EditTool::kErase ? QColor(255, 255, 255) : QColor(255, 220, 60));
    pen.setCosmetic(true);
    pen.setWidthF(1.5);
    p.setPen(pen);
    p.setBrush(Qt::NoBrush);
    p.setRenderHint(QPainter::Antialiasing, true);
    p.drawEllipse(c, cut * px_per_mm_x, cut * px_per_mm_y);
    p.setRenderHint(QPainter::Antialiasing, false);
}

const QImage& MprView::previewImage() {
    const edit::EditPreview* pv = edit_ && state_->hasImage() ? edit_->preview() : nullptr;
    const int64_t slice = state_->hasImage() ? state_->slice(axis_) : -1;
    const std::pair<int, int64_t> key{pv ? edit_->previewGeneration() : -1, slice};
    if (key == preview_key_) return preview_image_;
    preview_key_ = key;
    preview_pixels_ = 0;
    preview_image_ = QImage();
    const SliceFrame& f = state_->frame(axis_);
    if (!pv || slice < pv->box_lo[f.axis_n] || slice > pv->box_hi[f.axis_n]) return preview_image_;
    const int64_t w = f.width, h = f.height;
    const auto size = state_->image().geometry().size;
    std::vector<int> mask(static_cast<size_t>(w * h), -1);  // the value each pixel would get
    for (size_t n = 0; n < pv->voxels.size(); ++n) {
        const int64_t idx = pv->voxels[n];
        const std::array<int64_t, 3> v{idx % size[0], (idx / size[0]) % size[1],
                                       idx / (size[0] * size[1])};
        if (v[f.axis_n] != slice) continue;
        const auto s = f.screen(v);
        mask[static_cast<size_t>(s[1] * w + s[0])] = pv->values[n];
    }
    preview_image_ = QImage(static_cast<int>(w), static_cast<int>(h), QImage::Format_ARGB32);
    preview_image_.fill(Qt::transparent);
    std::map<int, QColor> fills;
    for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
            const int value = mask[static_cast<size_t>(y * w + x)];
            if (value < 0) continue;
            ++preview_pixels_;
            // Its outline in light yellow, the inside in the label's colour, see-through.
            auto in = [&](int64_t xx, int64_t yy) {
                return xx >= 0 && yy >= 0 && xx < w && yy < h &&
                       mask[static_cast<size_t>(yy * w + xx)] >= 0;
            };
            const bool edge = !in(x - 1, y) || !in(x + 1, y) || !in(x, y - 1) || !in(x, y + 1);
            QColor c(255, 240, 120, 230);
            if (!edge) {
                auto it = fills.find(value);
                if (it == fills.end()) {
                    // A value without a row yet gets the colour its new row will get.
                    const int row = state_->rowOfLabel(value);
                    const auto rgb = row >= 0 ? state_->labels()[static_cast<size_t>(row)].color
                                              : state_->nextLabelColor();
                    it = fills.emplace(value, QColor(rgb[0], rgb[1], rgb[2], 150)).first;
                }
                c = it->second;
            }
            preview_image_.setPixelColor(static_cast<int>(x), static_cast<int>(y), c);
        }
    return preview_image_;
}

int MprView::previewPixels() {
    (void)previewImage();
    return preview_pixels_;
}

void MprView::drawPreview(QPainter& p) {
    const QImage& img = previewImage();
    if (img.isNull()) return;
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(imageRect(), img);
}

void MprView::setZoom(double zoom) {
    zoom_ = std::clamp(zoom, kMinZoom, kMaxZoom);
    update();
}

void MprView::resetView() {
    zoom_ = 1.0;
    pan_ = {0, 0};
    update();
}

void MprView::setSmooth(bool smooth) {
    smooth_ = smooth;
    update();
}

void MprView::invalidate() {
    dirty_ = true;
    update();
}

void MprView::onCursorChanged() {
    // A new slice needs new pixels; an in-plane move only redraws the crosshair.
    if (state_->hasImage() && state_->slice(axis_) != rendered_slice_) dirty_ = true;
    update();
}

void MprView::render() {
    const SliceFrame& f = state_->frame(axis_);
    const int64_t slice = state_->slice(axis_);
    if (image_.width() != f.width || image_.height() != f.height)
        image_ =
            QImage(static_cast<int>(f.width), static_cast<int>(f.height), QImage::Format_RGB32);
    auto* argb = reinterpret_cast<uint32_t*>(image_.bits());
    if (use_slab_cache_)
        slab_.render(state_->image(), f, slice, state_->window(), argb);
    else
        renderSlice(state_->image(), f, slice, state_->window(), argb);
    if (state_->hasLabelMap())
        blendLabels(state_->labelMap(), f, slice, state_->labelColors(), state_->overlayMode(),
                    argb, &state_->labelBounds(), state_->labelRuns());
    rendered_slice_ = slice;
    dirty_ = false;
}

const QImage& MprView::sliceImage() {
    if (state_->hasImage() && dirty_) render();
    return image_;
}

QRectF MprView::imageRect() const {
    const SliceFrame& f = state_->frame(axis_);
    const double mm_w = static_cast<double>(f.width) * f.spacing_x;
    const double mm_h = static_cast<double>(f.height) * f.spacing_y;
    if (mm_w <= 0 || mm_h <= 0) return {};
    const double margin = 4;
    const double fit = std::min((width() - 2 * margin) / mm_w, (height() - 2 * margin) / mm_h);
    const double scale = std::max(fit, 1e-6) * zoom_;
    const QSizeF size(mm_w * scale, mm_h * scale);
    const QPointF centre = QPointF(width() / 2.0, height() / 2.0) + pan_;
    return {centre - QPointF(size.width() / 2, size.height() / 2), size};
}

QPointF MprView::widgetPointOfPixel(double column, double row) const {
    const SliceFrame& f = state_->frame(axis_);
    const QRectF r = imageRect();
    return {r.left() + (column + 0.5) * r.width() / static_cast<double>(f.width),
            r.top() + (row + 0.5) * r.height() / static_cast<double>(f.height)};
}

std::optional<std::array<int64_t, 3>> MprView::voxelAt(const QPointF& p) const {
    const auto px = pixelAt(p);
    if (!px) return std::nullopt;
    return state_->frame(axis_).voxel(static_cast<int64_t>(px->x()), static_cast<int64_t>(px->y()),
                                      state_->slice(axis_));
}

void MprView::paintEvent(QPaintEvent*) {
    ++paint_count_;
    QPainter p(this);
    p.fillRect(rect(), Qt::black);
    if (!state_->hasImage()) {
        p.setPen(QColor(150, 150, 150));
        p.drawText(rect(), Qt::AlignCenter,
                   QString("%1\nopen a DICOM folder or an image (Ctrl+O), or drop it here")
                       .arg(viewAxisName(axis_)));
        return;
    }
    if (dirty_) render();
    const QRectF r = imageRect();
    p.setRenderHint(QPainter::SmoothPixmapTransform, smooth_);
    p.drawImage(r, image_);
    drawPreview(p);
    if (comparison_) drawComparison(p, *this, *comparison_);

    // Crosshair through the cursor, with a gap around it so the voxel stays visible.
    const SliceFrame& f = state_->frame(axis_);
    const auto s = f.screen(state_->cursor());
    const QPointF c = widgetPointOfPixel(static_cast<double>(s[0]), static_cast<double>(s[1]));
    const double gap = 8;
    // The vertical line is the plane of the view whose normal runs along screen x, and so on.
    const ViewAxis vertical_view =
        f.axis_x == state_->frame(ViewAxis::kSagittal).axis_n
            ? ViewAxis::kSagittal
            : (f.axis_x == state_->frame(ViewAxis::kCoronal).axis_n ? ViewAxis::kCoronal
                                                                    : ViewAxis::kAxial);
    const ViewAxis horizontal_view =
        f.axis_y == state_->frame(ViewAxis::kAxial).axis_n
            ? ViewAxis::kAxial
            : (f.axis_y == state_->frame(ViewAxis::kCoronal).axis_n ? ViewAxis::kCoronal
                                                                    : ViewAxis::kSagittal);
    QPen pen(crosshairColor(vertical_view));
    pen.setCosmetic(true);
    pen.setWidthF(1.0);
    p.setPen(pen);
    // Lines run across the whole view (a thin slab would hide them inside the image). A linked
    // point outside this series (ui/series_link.h) has no crosshair here.
    if (!state_->cursorOutside()) {
        p.drawLine(QPointF(c.x(), 0), QPointF(c.x(), c.y() - gap));
        p.drawLine(QPointF(c.x(), c.y() + gap), QPointF(c.x(), height()));
        pen.setColor(crosshairColor(horizontal_view));
        p.setPen(pen);
        p.drawLine(QPointF(0, c.y()), QPointF(c.x() - gap, c.y()));
        p.drawLine(QPointF(c.x() + gap, c.y()), QPointF(width(), c.y()));
    }

    // Orientation letters, slice number, window.
    QFont font = p.font();
    font.setBold(true);
    p.setFont(font);
    p.setPen(QColor(255, 210, 60));
    const QFontMetrics fm(font);
    const int pad = 6;
    const QRect wr = rect().adjusted(pad, pad, -pad, -pad);
    p.drawText(wr, Qt::AlignLeft | Qt::AlignVCenter, QString(QChar(f.letters[0])));
    p.drawText(wr, Qt::AlignRight | Qt::AlignVCenter, QString(QChar(f.letters[1])));
    p.drawText(wr, Qt::AlignHCenter | Qt::AlignTop, QString(QChar(f.letters[2])));
    p.drawText(wr, Qt::AlignHCenter | Qt::AlignBottom, QString(QChar(f.letters[3])));
    font.setBold(false);
    p.setFont(font);
    p.setPen(QColor(220, 220, 220));
    p.drawText(
        wr, Qt::AlignLeft | Qt::AlignTop,
        QString("%1  %2/%3").arg(viewAxisName(axis_)).arg(state_->slice(axis_) + 1).arg(f.depth));
    const WindowLevel w = state_->window();
    p.drawText(wr, Qt::AlignLeft | Qt::AlignBottom,
               QString("W %1  L %2").arg(w.width, 0, 'f', 0).arg(w.level, 0, 'f', 0));
    if (zoom_ != 1.0)
        p.drawText(wr, Qt::AlignRight | Qt::AlignBottom, QString("x%1").arg(zoom_, 0, 'f', 2));
    if (state_->cursorOutside()) {
        p.setPen(QColor(255, 150, 60));
        p.drawText(wr, Qt::AlignRight | Qt::AlignTop, "linked point outside");
    }
    drawBrush(p);
    drawPrompt(p);
    if (measure_) drawMeasurements(p, *this, *measure_);
    if (hasFocus()) {
        QPen fp(QColor(80, 140, 230));
        fp.setCosmetic(true);
        p.setPen(fp);
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(rect()).adjusted(0.5, 0.5, -0.5, -0.5));
    }
    (void)fm;
}

void MprView::moveCrosshairTo(const QPointF& p) {
    if (auto v = voxelAt(p)) state_->setCursor(*v);
}

void MprView::mousePressEvent(QMouseEvent* e) {
    const bool focus_click = focus_click_;
    focus_click_ = false;
    if (!state_->hasImage()) return;
    drag_start_ = e->position();
    if (e->button() == Qt::LeftButton) {
        // The second press of a double-click keeps the crosshair of before the first.
        const bool second =
            left_press_clock_.isValid() &&
            left_press_clock_.elapsed() <= QApplication::doubleClickInterval() &&
            (e->position() - left_press_at_).manhattanLength() <= QApplication::startDragDistance();
        if (!second) cursor_before_click_ = state_->cursor();
        left_press_clock_.start();
        left_press_at_ = e->position();
    }
    // The click that took the focus from a field or the table: nothing else (no crosshair
    // move, no edit).
    if (focus_click && e->button() == Qt::LeftButton) return;
    if (measure_ && measure_->tool() != MeasureKind::kNone && e->button() == Qt::LeftButton &&
        !(e->modifiers() & Qt::ShiftModifier)) {
        const MeasureHit hit = measurementAt(*this, *measure_, e->position());
        if (auto point = patientPointAt(e->position());
            point && measure_->press(axis_, *point, hit.index, hit.handle)) {
            drag_ = Drag::kMeasure;
            return;
        }
    }
    if (edit_ && edit_->tool() == EditTool::kInteractive &&
        (e->button() == Qt::LeftButton || e->button() == Qt::RightButton)) {
        // Interactive prompts: Shift+click or right click excludes (SlicerNNInteractive's
        // negative prompt); no pan or window/level while the tool is on.
        const bool exclude = e->button() == Qt::RightButton || (e->modifiers() & Qt::ShiftModifier);
        if (auto point = patientPointAt(e->position());
            point && edit_->press(axis_, *point, exclude)) {
            drag_ = Drag::kEdit;
            return;
        }
    }
    if (edit_ && e->button() == Qt::LeftButton && !(e->modifiers() & Qt::ShiftModifier)) {
        if (auto point = patientPointAt(e->position()); point && edit_->press(axis_, *point)) {
            drag_ = Drag::kEdit;
            return;
        }
    }
    if (e->button() == Qt::LeftButton && !(e->modifiers() & Qt::ShiftModifier)) {
        drag_ = Drag::kCrosshair;
        moveCrosshairTo(e->position());
    } else if (e->button() == Qt::RightButton) {
        drag_ = Drag::kWindow;
        window_start_ = state_->window();
    } else if (e->button() == Qt::MiddleButton || e->button() == Qt::LeftButton) {
        drag_ = Drag::kPan;
        pan_start_ = pan_;
    }
}

void MprView::mouseMoveEvent(QMouseEvent* e) {
    mouse_over_ = true;
    emit hovered(voxelAt(e->position()));
    const std::optional<Vec3> point =
        edit_ || measure_ ? patientPointAt(e->position()) : std::nullopt;
    if (edit_) edit_->hover(axis_, point);
    const QPointF d = e->position() - drag_start_;
    switch (drag_) {
        case Drag::kEdit:
            if (point) edit_->drag(axis_, *point);
            break;
        case Drag::kMeasure:
            if (point) measure_->drag(*point);
            break;
        case Drag::kCrosshair:
            moveCrosshairTo(e->position());
            break;
        case Drag::kWindow: {
            // Horizontal: width; vertical: level (drag down = brighter, as in most viewers).
            const double unit = std::max(window_start_.width, 1.0) / 256.0;
            state_->setWindow(
                {window_start_.width + d.x() * unit * 2, window_start_.level - d.y() * unit * 2});
            break;
        }
        case Drag::kPan:
            pan_ = pan_start_ + d;
            update();
            break;
        case Drag::kNone:
            break;
    }
}

void MprView::mouseReleaseEvent(QMouseEvent*) {
    if (drag_ == Drag::kEdit) edit_->release();
    if (drag_ == Drag::kMeasure) measure_->release();
    drag_ = Drag::kNone;
}

void MprView::mouseDoubleClickEvent(QMouseEvent* e) {
    // Two quick clicks with a measure tool are measurements, not a double-click.
    const bool tool = (edit_ && edit_->tool() != EditTool::kNone) ||
                      (measure_ && measure_->tool() != MeasureKind::kNone);
    if (!state_->hasImage() || tool || e->button() != Qt::LeftButton ||
        e->modifiers() != Qt::NoModifier)
        return QWidget::mouseDoubleClickEvent(e);
    drag_ = Drag::kNone;
    if (cursor_before_click_ && left_press_clock_.isValid() &&
        left_press_clock_.elapsed() <= 2 * QApplication::doubleClickInterval())
        state_->setCursor(*cursor_before_click_);
    cursor_before_click_.reset();
    emit maximizeRequested();
}

void MprView::leaveEvent(QEvent*) {
    mouse_over_ = false;
    emit hovered(std::nullopt);
    if (edit_) edit_->hover(axis_, std::nullopt);
}

void MprView::wheelEvent(QWheelEvent* e) {
    if (!state_->hasImage()) return;
    if (edit_ && (e->modifiers() & Qt::ShiftModifier) &&
        (edit_->tool() == EditTool::kPaint || edit_->tool() == EditTool::kErase)) {
        // Slicer: Shift+wheel sizes the brush (Qt may report it as a horizontal wheel).
        const int delta = e->angleDelta().y() != 0 ? e->angleDelta().y() : e->angleDelta().x();
        edit_->setRadiusMm(edit_->radiusMm() * std::pow(1.1, delta > 0 ? 1 : -1));
        e->accept();
        return;
    }
    const int steps = e->angleDelta().y() / 120 != 0 ? e->angleDelta().y() / 120
                                                     : (e->angleDelta().y() > 0 ? 1 : -1);
    if (e->angleDelta().y() == 0) return;
    if (e->modifiers() & Qt::ControlModifier) {
        setZoom(zoom_ * std::pow(1.15, steps));
    } else {
        state_->moveSlice(axis_, steps);
        emit hovered(voxelAt(e->position()));
    }
    e->accept();
}

void MprView::keyPressEvent(QKeyEvent* e) {
    if (!state_->hasImage()) return QWidget::keyPressEvent(e);
    const int64_t page = std::max<int64_t>(1, state_->frame(axis_).depth / 10);
    switch (e->key()) {
        case Qt::Key_Up:
        case Qt::Key_Right:
            state_->moveSlice(axis_, 1);
            break;
        case Qt::Key_Down:
        case Qt::Key_Left:
            state_->moveSlice(axis_, -1);
            break;
        case Qt::Key_PageUp:
            state_->moveSlice(axis_, page);
            break;
        case Qt::Key_PageDown:
            state_->moveSlice(axis_, -page);
            break;
        case Qt::Key_Home:
            state_->setSlice(axis_, 0);
            break;
        case Qt::Key_End:
            state_->setSlice(axis_, state_->frame(axis_).depth - 1);
            break;
        case Qt::Key_Plus:
        case Qt::Key_Equal:
            setZoom(zoom_ * 1.25);
            break;
        case Qt::Key_Minus:
            setZoom(zoom_ / 1.25);
            break;
        case Qt::Key_R:
            resetView();
            break;
        default:
            QWidget::keyPressEvent(e);
    }
}

}  // namespace voxseg::ui
