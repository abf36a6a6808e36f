// voxseg_bench_viewer: redraw timings of voxseg-viewer's MPR views (docs/perf-viewer.md).
//
//   xvfb-run -a -s "-screen 0 1920x1080x24" env LIBGL_ALWAYS_SOFTWARE=1 \
//       build/bench/voxseg_bench_viewer [volume.nii.gz|dicom-folder] [--frames N] [--3d]
//
// Without a path it generates a 512x512x500 int16 CT phantom (bench/ct_phantom.h). It opens the
// real MainWindow (1x3 layout, 1920x1080, docks shown), then measures: the first image (setStudy ->
// all three views painted and flushed: default window, slice rendering, scaling), slice scrolling
// in each view (state->moveSlice, then the event loop until the view has painted: render +
// window/level + overlay + scaled blit + flush to the X server), the same with a label overlay, and
// with --3d the surface build and 3D view redraws (2x2 layout, OpenGL; Mesa llvmpipe under Xvfb).
#include "bench/ct_phantom.h"
#include "pipeline/segment.h"
#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/surface_view.h"
#include "ui/viewer_state.h"

#include <QApplication>
#include <QTest>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace voxseg;
using namespace voxseg::ui;

// CPU time of the calling thread (ms): unlike wall time, not inflated by other processes.
double threadCpuMs() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Stats {
    double mean = 0, p50 = 0, p95 = 0, max = 0;
    double cpu_mean = 0;  // GUI thread CPU time per frame
};
Stats summarize(std::vector<double> v) {
    Stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    for (double x : v) s.mean += x;
    s.mean /= static_cast<double>(v.size());
    s.p50 = v[v.size() / 2];
    s.p95 = v[std::min(v.size() - 1, v.size() * 95 / 100)];
    s.max = v.back();
    return s;
}

void printRow(const char* what, const Stats& s) {
    std::printf("| %-46s | %7.2f | %7.2f | %7.2f | %7.2f | %7.2f |\n", what, s.mean, s.p50, s.p95,
                s.max, s.cpu_mean);
    std::fflush(stdout);
}

// Runs the event loop until every view in `views` has painted once more (painting and the
// flush to the window system happen in the same update request).
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

// Scrolls one view back and forth over `frames` slices: the wheel's path (moveSlice ->
// update) until the view has painted and flushed.
Stats scroll(MainWindow& w, ViewAxis axis, int frames) {
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
    Stats st = summarize(times);
    st.cpu_mean = (threadCpuMs() - cpu0) / frames;
    return st;
}

// Moves the crosshair in the axial view: the coronal and sagittal views change slice together.
Stats crosshair(MainWindow& w, int frames) {
    ViewerState* s = w.state();
    std::vector<double> times;
    QCoreApplication::processEvents();
    const double cpu0 = threadCpuMs();
    for (int f = 0; f < frames; ++f) {
        auto c = s->cursor();
        const int d = (f / 50) % 2 ? -1 : 1;
        c[0] += d;
        c[1] += d;
        const auto t0 = Clock::now();
        s->setCursor(c);
        waitForPaint(
            {w.view(ViewAxis::kAxial), w.view(ViewAxis::kCoronal), w.view(ViewAxis::kSagittal)});
        times.push_back(ms(t0, Clock::now()));
    }
    Stats st = summarize(times);
    st.cpu_mean = (threadCpuMs() - cpu0) / frames;
    return st;
}

}  // namespace

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setOrganizationName("voxseg-bench");
    QApplication::setApplicationName("voxseg-bench-viewer");
    std::string path;
    int frames = 300;
    bool with_3d = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--frames" && i + 1 < argc)
            frames = std::stoi(argv[++i]);
        else if (a == "--3d")
            with_3d = true;
        else
            path = a;
    }

    pipeline::StudyInput study;
    std::string what;
    if (path.empty()) {
        const auto t0 = Clock::now();
        study.volume = bench::makeCtPhantom(512, 512, 500);
        study.volume.info().modality = "CT";
        what = "generated 512x512x500 int16 CT phantom";
        std::printf("phantom generated in %.1f s\n", ms(t0, Clock::now()) / 1000);
    } else {
        auto r = pipeline::loadStudy(path, "", {});
        if (!r.isOk()) {
            std::fprintf(stderr, "%s\n", r.status().toString().c_str());
            return 1;
        }
        study = std::move(r.value());
        what = path;
    }
    const Geometry g = study.volume.geometry();

    MainWindow w;
    w.setInteractive(false);
    w.resize(1920, 1080);
    w.show();
    if (!QTest::qWaitForWindowExposed(&w)) {
        std::fprintf(stderr, "window not exposed\n");
        return 1;
    }
    QTest::qWait(200);

    const std::vector<MprView*> all = {w.view(ViewAxis::kAxial), w.view(ViewAxis::kCoronal),
                                       w.view(ViewAxis::kSagittal)};
    const auto t0 = Clock::now();
    w.state()->setStudy(study, QString::fromStdString(what));
    waitForPaint(all);
    const double first_ms = ms(t0, Clock::now());

    std::printf(
        "\nvolume: %s (%lldx%lldx%lld %s), platform %s, window 1920x1080, view %dx%d px\n\n",
        what.c_str(), static_cast<long long>(g.size[0]), static_cast<long long>(g.size[1]),
        static_cast<long long>(g.size[2]), pixelTypeName(study.volume.pixelType()),
        qPrintable(QGuiApplication::platformName()), w.view(ViewAxis::kAxial)->width(),
        w.view(ViewAxis::kAxial)->height());
    std::printf("first image (3 views) after the volume is loaded: %.1f ms\n\n", first_ms);
    std::printf(
        "| step (wall ms; cpu = GUI thread CPU ms)        |    mean |     p50 |     p95 |     max "
        "|     cpu |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    for (auto axis : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal})
        printRow((std::string(viewAxisName(axis)) + ", bilinear").c_str(), scroll(w, axis, frames));
    for (int a = 0; a < 3; ++a) w.view(static_cast<ViewAxis>(a))->setSmooth(false);
    printRow("axial, nearest", scroll(w, ViewAxis::kAxial, frames));
    printRow("crosshair drag (all three views), bilinear", crosshair(w, frames));
    for (int a = 0; a < 3; ++a) w.view(static_cast<ViewAxis>(a))->setSmooth(true);

    // The slice + window part of one frame alone (CPU ms).
    {
        const int reps = 50;
        for (auto axis : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal}) {
            const SliceFrame& f = w.state()->frame(axis);
            std::vector<uint32_t> argb(static_cast<size_t>(f.width * f.height));
            const double c0 = threadCpuMs();
            for (int r = 0; r < reps; ++r)
                renderSlice(study.volume, f, (r * 7) % f.depth, w.state()->window(), argb.data());
            const double render = (threadCpuMs() - c0) / reps;
            std::printf("parts, %s: slice + window (renderSlice) %.2f ms CPU\n", viewAxisName(axis),
                        render);
        }
        std::printf("\n");
    }

    // A label overlay: thresholds of the image (lungs and bone on the phantom).
    Volume labels = Volume::allocate<uint8_t>(g);
    visitPixels(study.volume, [&](const auto* p) {
        uint8_t* l = labels.data<uint8_t>();
        for (int64_t i = 0; i < g.voxelCount(); ++i)
            l[i] = p[i] < -500 && p[i] > -950 ? 1 : (p[i] > 300 ? 2 : 0);
    });
    const auto tl = Clock::now();
    const Status st =
        w.state()->setLabelMap(labels, {{1, "lung", {80, 160, 255}}, {2, "bone", {240, 220, 120}}});
    if (!st.isOk()) std::fprintf(stderr, "%s\n", st.toString().c_str());
    const double label_ms = ms(tl, Clock::now());
    for (auto axis : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal})
        printRow((std::string(viewAxisName(axis)) + ", bilinear, label fill overlay").c_str(),
                 scroll(w, axis, frames));
    w.state()->setOverlayMode(OverlayMode::kOutline);
    printRow("axial, bilinear, label outline overlay", scroll(w, ViewAxis::kAxial, frames));
    printRow("crosshair drag (all three views), fill overlay", crosshair(w, frames));
    w.state()->setOverlayMode(OverlayMode::kFill);
    std::printf("\nlabel map shown (grid check + statistics on the GUI thread): %.1f ms\n",
                label_ms);

    if (with_3d) {
        const auto tb = Clock::now();
        w.setLayoutMode(MainWindow::Layout::k2x2);
        auto* surface = qobject_cast<SurfaceView*>(w.surfaceView());
        if (!surface) {
            std::printf("3D view: no OpenGL here\n");
        } else {
            // Surfaces are built on a worker thread from the moment the view is first shown.
            if (!QTest::qWaitFor([&] { return !surface->building() && !surface->meshes().empty(); },
                                 600000))
                std::printf("3D surfaces not built within 10 min\n");
            const double build_ms = ms(tb, Clock::now());
            size_t triangles = 0;
            for (const auto& m : surface->meshes()) triangles += m.triangleCount();
            std::printf("3D: %zu surfaces, %zu triangles built in %.0f ms (worker thread)\n",
                        surface->meshes().size(), triangles, build_ms);
            printRow("2x2 with 3D view: axial, bilinear, fill",
                     scroll(w, ViewAxis::kAxial, frames));
            printRow("2x2 with 3D view: sagittal, bilinear, fill",
                     scroll(w, ViewAxis::kSagittal, frames));
            // One rotation step = a frame rendered by OpenGL into the view's framebuffer object
            // and read back (what a mouse drag costs), then painted.
            std::vector<double> times;
            const double cpu0 = threadCpuMs();
            const int n3d = std::min(frames, 40);
            for (int f = 0; f < n3d; ++f) {
                const QPoint c = surface->rect().center();
                QMouseEvent press(QEvent::MouseButtonPress, c, surface->mapToGlobal(c),
                                  Qt::LeftButton, Qt::LeftButton, Qt::NoModifier);
                QMouseEvent move(QEvent::MouseMove, c + QPoint(4, 0),
                                 surface->mapToGlobal(c + QPoint(4, 0)), Qt::NoButton,
                                 Qt::LeftButton, Qt::NoModifier);
                const auto t = Clock::now();
                QApplication::sendEvent(surface, &press);
                QApplication::sendEvent(surface, &move);
                surface->repaint();
                times.push_back(ms(t, Clock::now()));
            }
            Stats st = summarize(times);
            st.cpu_mean = (threadCpuMs() - cpu0) / n3d;
            printRow("3D view: rotate one step (2x2)", st);
        }
    }
    return 0;
}
