#include "ui/redraw_bench.h"

#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/viewer_state.h"

#include <fmt/format.h>

#include <QCoreApplication>
#include <QGuiApplication>

#include <time.h>

#include <algorithm>
#include <chrono>

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
