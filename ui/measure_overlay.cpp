#include "ui/measure_overlay.h"

#include "ui/measure_tool.h"
#include "ui/mpr_view.h"
#include "ui/viewer_state.h"

#include <QPainter>

#include <cmath>

namespace voxseg::ui {
namespace {

constexpr double kPickPixels = 6.0;

// Where a measurement lies in a view (widget coordinates); shown false when not in it.
struct Placed {
    bool shown = false;
    bool home = false;  // the view and slice it was drawn on (its text and handles go there)
    QPointF a, b;
    QPointF centre;  // ellipse, sphere
    double rx = 0, ry = 0;
};

double pixelsPerMm(const MprView& view, const SliceFrame& f) {
    const QPointF d = view.widgetPointOfPixel(1, 0) - view.widgetPointOfPixel(0, 0);
    return std::hypot(d.x(), d.y()) / f.spacing_x;
}

Placed place(const MprView& view, const ViewerState& state, const Measurement& m) {
    Placed out;
    if (!state.hasImage()) return out;
    out.home = m.view == view.axis() && state.slice(view.axis()) == m.slice;
    out.a = view.widgetPointOfPatient(m.a_mm);
    out.b = view.widgetPointOfPatient(m.b_mm);
    if (m.kind != MeasureKind::kSphere) {
        out.shown = out.home;
        const QRectF r = QRectF(out.a, out.b).normalized();
        out.centre = r.center();
        out.rx = r.width() / 2;
        out.ry = r.height() / 2;
        return out;
    }
    double d = 0;
    out.centre = view.widgetPointOfPatient(m.sphere.centre_mm, &d);
    const double r = m.sphere.radius_mm;
    if (std::abs(d) >= r && !out.home) return out;
    const double cut = std::sqrt(std::max(0.0, r * r - d * d));
    out.rx = out.ry = cut * pixelsPerMm(view, state.frame(view.axis()));
    out.shown = true;
    return out;
}

double distanceToSegment(const QPointF& p, const QPointF& a, const QPointF& b) {
    const QPointF ab = b - a;
    const double len2 = QPointF::dotProduct(ab, ab);
    const double t = len2 > 0 ? std::clamp(QPointF::dotProduct(p - a, ab) / len2, 0.0, 1.0) : 0.0;
    const QPointF q = a + t * ab - p;
    return std::hypot(q.x(), q.y());
}

// Distance of p from an axis-aligned ellipse's outline (approximate: exact for a circle).
double distanceToEllipse(const QPointF& p, const QPointF& c, double rx, double ry) {
    if (rx <= 0 || ry <= 0) return std::hypot(p.x() - c.x(), p.y() - c.y());
    const double x = (p.x() - c.x()) / rx, y = (p.y() - c.y()) / ry;
    const double rho = std::hypot(x, y);
    return std::abs(rho - 1.0) * std::min(rx, ry);
}

void drawLabel(QPainter& p, const QPointF& at, const QString& text) {
    const QStringList lines = text.split(" / ");
    const QFontMetricsF fm(p.font());
    double w = 0;
    for (const QString& l : lines) w = std::max(w, fm.horizontalAdvance(l));
    const double h = fm.height() * static_cast<double>(lines.size());
    QRectF box(at + QPointF(8, 4), QSizeF(w + 8, h + 4));
    // Kept inside the view.
    const QRectF bounds = p.window();
    if (box.right() > bounds.right()) box.moveRight(std::max(bounds.left(), at.x() - 8));
    if (box.bottom() > bounds.bottom()) box.moveBottom(std::max(bounds.top(), at.y() - 4));
    p.fillRect(box, QColor(0, 0, 0, 160));
    p.drawText(box.adjusted(4, 2, -4, -2), Qt::AlignLeft | Qt::AlignTop, lines.join('\n'));
}

}  // namespace

void drawMeasurements(QPainter& p, const MprView& view, const MeasureTool& tool) {
    const auto& items = tool.measurements();
    if (items.empty()) return;
    p.save();
    p.setRenderHint(QPainter::Antialiasing, true);
    for (size_t i = 0; i < items.size(); ++i) {
        const Measurement& m = items[i];
        const Placed at = place(view, *tool.state(), m);
        if (!at.shown) continue;
        const bool selected = static_cast<int>(i) == tool.selected();
        const QColor colour = selected ? QColor(255, 230, 60) : QColor(90, 220, 255);
        QPen pen(colour);
        pen.setCosmetic(true);
        pen.setWidthF(1.5);
        p.setPen(pen);
        p.setBrush(Qt::NoBrush);
        if (m.kind == MeasureKind::kRuler) {
            p.drawLine(at.a, at.b);
            // Ticks across the ends.
            const QPointF d = at.b - at.a;
            const double len = std::hypot(d.x(), d.y());
            if (len > 0) {
                const QPointF n(-d.y() / len * 5, d.x() / len * 5);
                p.drawLine(at.a - n, at.a + n);
                p.drawLine(at.b - n, at.b + n);
            }
        } else {
            p.drawEllipse(at.centre, at.rx, at.ry);
        }
        if (!at.home) continue;
        if (selected) {
            p.setBrush(colour);
            for (const QPointF& h : {at.a, at.b}) p.drawEllipse(h, 2.5, 2.5);
            p.setBrush(Qt::NoBrush);
        }
        const QString text = tool.describe(static_cast<int>(i));
        if (!text.isEmpty()) {
            p.setPen(colour);
            drawLabel(p, m.kind == MeasureKind::kRuler ? at.b : at.centre + QPointF(at.rx, 0),
                      text);
        }
    }
    p.restore();
}

MeasureHit measurementAt(const MprView& view, const MeasureTool& tool, const QPointF& pt) {
    const auto& items = tool.measurements();
    auto near = [&](const QPointF& q) { return std::hypot(q.x() - pt.x(), q.y() - pt.y()); };
    for (int i = static_cast<int>(items.size()) - 1; i >= 0; --i) {
        const Measurement& m = items[static_cast<size_t>(i)];
        const Placed at = place(view, *tool.state(), m);
        if (!at.shown) continue;
        if (at.home) {
            if (near(at.b) <= kPickPixels) return {i, 1};
            if (near(at.a) <= kPickPixels) return {i, 0};
        }
        const double d = m.kind == MeasureKind::kRuler
                             ? distanceToSegment(pt, at.a, at.b)
                             : distanceToEllipse(pt, at.centre, at.rx, at.ry);
        if (d <= kPickPixels) return {i, -1};
    }
    return {};
}

}  // namespace voxseg::ui
