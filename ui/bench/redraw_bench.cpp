#include "ui/bench/redraw_bench.h"

#include "ui/edit_controller.h"
#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/surface_view.h"
#include "ui/viewer_state.h"

#include <fmt/format.h>

#include <QApplication>
#include <QCoreApplication>
#include <QGuiApplication>
#include <QMouseEvent>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>

namespace voxseg::ui {
namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

void settle(int milliseconds) {
    const auto end = Clock::now() + std::chrono::milliseconds(milliseconds);
    while (Clock::now() < end) QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
}

}  // namespace

double threadCpuMs() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

RedrawStats summarizeTimes(std::vector<double> v, double cpu_ms_total) {
    RedrawStats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    for (double x : v) s.mean += x;
    s.mean /= static_cast<double>(v.size());
    s.p50 = v[v.size() / 2];
    s.p95 = v[std::min(v.size() - 1, v.size() * 95 / 100)];
    s.max = v.back();
    s.cpu_mean = cpu_ms_total / static_cast<double>(v.size());
    return s;
}

void waitForPaint(const std::vector<MprView*>& views) {
    std::vector<int> before;
    for (auto* v : views) before.push_back(v->paintCount());
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < views.size(); ++i) all &= views[i]->paintCount() > before[i];
        if (all || Clock::now() > deadline) return;
        QCoreApplication::processEvents(QEventLoop::AllEvents);
    }
}

RedrawStats scrollSteps(MainWindow& w, ViewAxis axis, int frames) {
    ViewerState* s = w.state();
    MprView* v = w.view(axis);
    const int64_t depth = s->frame(axis).depth;
    std::vector<double> times;
    int dir = 1;
    QCoreApplication::processEvents();
    const double cpu0 = threadCpuMs();
    for (int f = 0; f < frames; ++f) {
        if (s->slice(axis) + dir < 0 || s->slice(axis) + dir >= depth) dir = -dir;
        const auto t0 = Clock::now();
        s->moveSlice(axis, dir);
        waitForPaint({v});
        times.push_back(ms(t0, Clock::now()));
    }
    return summarizeTimes(std::move(times), threadCpuMs() - cpu0);
}

RedrawStats crosshairSteps(MainWindow& w, int frames) {
    ViewerState* s = w.state();
    std::vector<double> times;
    QCoreApplication::processEvents();
    const double cpu0 = threadCpuMs();
    // Diagonal steps that turn back at the volume's edges: a step into the edge would leave the
    // cursor where it is, nothing would repaint and the step would time out (10 s).
    const auto size = s->image().geometry().size;
    int d = 1;
    for (int f = 0; f < frames; ++f) {
        auto c = s->cursor();
        for (int a = 0; a < 2; ++a)
            if (c[a] + d < 0 || c[a] + d >= size[a]) d = -d;
        c[0] += d;
        c[1] += d;
        const auto t0 = Clock::now();
        s->setCursor(c);
        waitForPaint(
            {w.view(ViewAxis::kAxial), w.view(ViewAxis::kCoronal), w.view(ViewAxis::kSagittal)});
        times.push_back(ms(t0, Clock::now()));
    }
    return summarizeTimes(std::move(times), threadCpuMs() - cpu0);
}

std::string redrawTableHeader() {
    return "| step, bilinear (wall ms; cpu = GUI thread CPU ms) |    mean |     p50 |     p95 |    "
           " "
           "max |     cpu |\n|---|---:|---:|---:|---:|---:|\n";
}

std::string redrawTableRow(const std::string& what, const RedrawStats& s) {
    return fmt::format("| {:<50} | {:7.2f} | {:7.2f} | {:7.2f} | {:7.2f} | {:7.2f} |\n", what,
                       s.mean, s.p50, s.p95, s.max, s.cpu_mean);
}

std::string runRedrawBench(MainWindow& w, pipeline::StudyInput study, const std::string& what,
                           int frames) {
    const std::vector<MprView*> all = {w.view(ViewAxis::kAxial), w.view(ViewAxis::kCoronal),
                                       w.view(ViewAxis::kSagittal)};
    w.setLayoutMode(MainWindow::Layout::k1x3);
    settle(200);
    const Geometry g = study.volume.geometry();
    const auto t0 = Clock::now();
    w.state()->setStudy(std::move(study), QString::fromStdString(what));
    waitForPaint(all);
    const double first_ms = ms(t0, Clock::now());
    std::string out = fmt::format(
        "volume: {} ({}x{}x{} {}), platform {}, view {}x{} px\n\nfirst image (3 views) after the "
        "volume is loaded: {:.1f} ms\n\n",
        what, g.size[0], g.size[1], g.size[2], pixelTypeName(w.state()->image().pixelType()),
        QGuiApplication::platformName().toStdString(), w.view(ViewAxis::kAxial)->width(),
        w.view(ViewAxis::kAxial)->height(), first_ms);
    out += redrawTableHeader();
    for (auto layout : {MainWindow::Layout::k1x3, MainWindow::Layout::k2x2}) {
        w.setLayoutMode(layout);
        settle(200);
        const std::string name = layout == MainWindow::Layout::k1x3 ? "1x3 " : "2x2 ";
        for (auto axis : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal})
            out +=
                redrawTableRow(name + viewAxisName(axis) + " scroll", scrollSteps(w, axis, frames));
        out += redrawTableRow(name + "crosshair drag (three views)", crosshairSteps(w, frames));
    }
    w.setLayoutMode(MainWindow::Layout::k1x3);
    return out;
}

}  // namespace voxseg::ui

namespace voxseg::ui {
namespace {

// Waits for the views an edit repainted (their label repaint count went up).
void waitForEditPaint(const std::vector<MprView*>& views, const std::vector<int>& repaints_before) {
    std::vector<MprView*> changed;
    for (size_t i = 0; i < views.size(); ++i)
        if (views[i]->labelRepaints() > repaints_before[i]) changed.push_back(views[i]);
    if (!changed.empty()) waitForPaint(changed);
}

bool waitFor(const std::function<bool()>& done, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done()) {
        if (Clock::now() > deadline) return false;
        QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    }
    return true;
}

std::vector<int> labelRepaints(const std::vector<MprView*>& views) {
    std::vector<int> out;
    for (auto* v : views) out.push_back(v->labelRepaints());
    return out;
}

}  // namespace

std::string runEditBench(MainWindow& w, int frames) {
    std::string out;
    ViewerState* s = w.state();
    EditController* e = w.editController();
    const std::vector<MprView*> all = {w.view(ViewAxis::kAxial), w.view(ViewAxis::kCoronal),
                                       w.view(ViewAxis::kSagittal)};
    MprView* axial = all[0];
    const SliceFrame& f = s->frame(ViewAxis::kAxial);
    const Geometry g = s->image().geometry();
    const int label = 1 + [&] {
        int m = 0;
        for (const auto& l : s->labels()) m = std::max(m, l.value);
        return m;
    }();
    // The crosshair on the stroke's row so all three views cut it at first.
    s->setCursor(f.voxel(f.width / 3, f.height / 2, s->slice(ViewAxis::kAxial)));
    settle(100);
    e->setTool(EditTool::kPaint);
    e->setSphere(false);
    e->setRadiusMm(5.0);
    e->setActiveLabel(label);
    auto send = [&](QEvent::Type type, const QPointF& p) {
        QMouseEvent ev(type, p, axial->mapToGlobal(p),
                       type == QEvent::MouseMove ? Qt::NoButton : Qt::LeftButton,
                       type == QEvent::MouseButtonRelease ? Qt::NoButton : Qt::LeftButton,
                       Qt::NoModifier);
        QApplication::sendEvent(axial, &ev);
    };
    // The first press starts the edit session (copies of the label map, base.nrrd written).
    QPointF p = axial->widgetPointOfPixel(double(f.width) / 3, double(f.height) / 2);
    const auto t_start = Clock::now();
    send(QEvent::MouseButtonPress, p);
    waitForPaint(all);
    const double start_ms = ms(t_start, Clock::now());
    std::vector<double> times;
    const double cpu0 = threadCpuMs();
    const double step = axial->widgetPointOfPixel(1, 0).x() - axial->widgetPointOfPixel(0, 0).x();
    for (int i = 0; i < frames; ++i) {
        // Across a third of the image and back, 1.5 pixels a step, with a small wobble.
        const int phase = (i / 100) % 2 == 0 ? 1 : -1;
        p += QPointF(phase * 1.5 * step, (i % 4 < 2 ? 0.5 : -0.5) * step);
        const auto t0 = Clock::now();
        send(QEvent::MouseMove, p);
        waitForPaint(all);
        times.push_back(ms(t0, Clock::now()));
    }
    send(QEvent::MouseButtonRelease, p);
    out += redrawTableHeader();
    out += redrawTableRow(fmt::format("brush stroke step (5 mm disk, axial, 3 views repainted)"),
                          summarizeTimes(times, threadCpuMs() - cpu0));
    // Undo / redo of that stroke, alternately.
    std::vector<double> undo, redo;
    double cpu_undo = 0, cpu_redo = 0;
    for (int i = 0; i < 20; ++i) {
        for (bool is_undo : {true, false}) {
            const auto before = labelRepaints(all);
            const double c0 = threadCpuMs();
            const auto t0 = Clock::now();
            (void)(is_undo ? e->undo() : e->redo());
            waitForEditPaint(all, before);
            (is_undo ? undo : redo).push_back(ms(t0, Clock::now()));
            (is_undo ? cpu_undo : cpu_redo) += threadCpuMs() - c0;
        }
    }
    out += redrawTableRow("undo of the stroke (until repainted)", summarizeTimes(undo, cpu_undo));
    out += redrawTableRow("redo of the stroke (until repainted)", summarizeTimes(redo, cpu_redo));
    // Fill between slices over 100 axial slices: two 30 mm disks 100 slices apart.
    const int64_t k0 = std::max<int64_t>(0, s->slice(ViewAxis::kAxial) - 50);
    const int64_t k1 = std::min<int64_t>(f.depth - 1, k0 + 100);
    for (int64_t k : {k0, k1}) {
        edit::EditOp op;
        op.kind = edit::OpKind::kPaint;
        op.shape = edit::Shape::kDisk;
        op.plane = edit::Plane::kAxial;
        op.radius_mm = k == k0 ? 30.0 : 20.0;
        op.label = label + 1;
        op.points = {g.indexToPhysical({double(f.width) / 2, double(f.height) / 2, double(k)})};
        if (f.axis_n != 2) {  // a volume not stored axially: the same slices of the axial view
            const auto v = f.voxel(f.width / 2, f.height / 2, k);
            op.points = {g.indexToPhysical({double(v[0]), double(v[1]), double(v[2])})};
        }
        (void)e->apply(op);
    }
    e->setActiveLabel(label + 1);
    {
        const double c0 = threadCpuMs();
        const auto t0 = Clock::now();
        const Status st = e->fillBetweenSlices(ViewAxis::kAxial);
        const double wall = ms(t0, Clock::now());
        out += fmt::format(
            "\nfill between slices over {} axial slices: {:.0f} ms wall, {:.0f} ms "
            "GUI-thread CPU{}\n",
            k1 - k0, wall, threadCpuMs() - c0, st.isOk() ? "" : " (" + st.toString() + ")");
    }
    out += fmt::format(
        "first stroke press (edit session start: label map copies, base.nrrd): "
        "{:.0f} ms\n",
        start_ms);
    // The 3D surface of an edited label (2x2 layout with OpenGL).
    if (auto* surface = qobject_cast<SurfaceView*>(w.surfaceView());
        surface && surface->isVisible()) {
        QCoreApplication::processEvents();
        (void)waitFor([&] { return !surface->building(); }, 600000);
        std::vector<double> mesh_ms, worker_ms, worker_cpu_ms, gui_cpu_ms;
        for (int i = 0; i < 5; ++i) {
            (void)waitFor([&] { return !surface->building(); }, 600000);
            const int builds = surface->meshBuilds();
            edit::EditOp op;
            op.kind = edit::OpKind::kPaint;
            op.shape = edit::Shape::kSphere;
            op.radius_mm = 6.0;
            op.label = label;
            op.points = {g.indexToPhysical(
                {double(f.width) / 3 + 4.0 * i, double(f.height) / 2, double(g.size[2]) / 2})};
            const auto t0 = Clock::now();
            const double gui0 = threadCpuMs();
            (void)e->apply(op);
            // Every label it changed: the painted one and the one it painted over.
            (void)waitFor(
                [&] {
                    return surface->meshBuilds() > builds && !surface->building() &&
                           !surface->editsPending();
                },
                60000);
            surface->repaint();
            mesh_ms.push_back(ms(t0, Clock::now()));
            gui_cpu_ms.push_back(threadCpuMs() - gui0);
            worker_ms.push_back(surface->lastBuildSeconds() * 1000);
            worker_cpu_ms.push_back(surface->lastBuildCpuSeconds() * 1000);
        }
        for (auto* v : {&mesh_ms, &worker_ms, &worker_cpu_ms, &gui_cpu_ms})
            std::sort(v->begin(), v->end());
        out += fmt::format(
            "3D surfaces of the edited labels, the painted one and the one it painted over "
            "(edit -> re-meshed and drawn, {} ms pause included): median {:.0f} ms, max {:.0f} ms "
            "(the build on the worker: median {:.0f} ms, {:.0f} ms of its CPU; the GUI thread's "
            "CPU from the edit to the drawn view: median {:.0f} ms)\n",
            SurfaceView::kRemeshDelayMs, mesh_ms[2], mesh_ms.back(), worker_ms[2], worker_cpu_ms[2],
            gui_cpu_ms[2]);
    }
    e->setTool(EditTool::kNone);
    return out;
}

}  // namespace voxseg::ui
