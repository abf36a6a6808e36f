#include "ui/mpr_view.h"

#include "ui/edit_controller.h"
#include "ui/viewer_state.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

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
}

void MprView::setEditController(EditController* controller) {
    edit_ = controller;
    connect(edit_, &EditController::brushChanged, this, qOverload<>(&QWidget::update));
    connect(edit_, &EditController::toolChanged, this, [this] {
        setCursor(edit_->tool() == EditTool::kNone ? Qt::ArrowCursor : Qt::CrossCursor);
    });
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
    // Lines run across the whole view (a thin slab would hide them inside the image).
    p.drawLine(QPointF(c.x(), 0), QPointF(c.x(), c.y() - gap));
    p.drawLine(QPointF(c.x(), c.y() + gap), QPointF(c.x(), height()));
    pen.setColor(crosshairColor(horizontal_view));
    p.setPen(pen);
    p.drawLine(QPointF(0, c.y()), QPointF(c.x() - gap, c.y()));
    p.drawLine(QPointF(c.x() + gap, c.y()), QPointF(width(), c.y()));

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
    drawBrush(p);
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
    if (!state_->hasImage()) return;
    drag_start_ = e->position();
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
    emit hovered(voxelAt(e->position()));
    const std::optional<Vec3> point = edit_ ? patientPointAt(e->position()) : std::nullopt;
    if (edit_) edit_->hover(axis_, point);
    const QPointF d = e->position() - drag_start_;
    switch (drag_) {
        case Drag::kEdit:
            if (point) edit_->drag(axis_, *point);
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
    drag_ = Drag::kNone;
}

void MprView::leaveEvent(QEvent*) {
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
