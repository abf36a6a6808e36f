// voxseg_bench_viewer: redraw timings of voxseg-viewer's MPR views (docs/perf-viewer.md).
//
//   xvfb-run -a -s "-screen 0 1920x1080x24" env LIBGL_ALWAYS_SOFTWARE=1 \
//       build/bench/voxseg_bench_viewer [volume.nii.gz|dicom-folder] [--frames N] [--3d] [--edit]
//   build/bench/voxseg_bench_viewer --redraw VOLUME [--frames N] [--size WxH]
//
// --redraw prints the short report that was `voxseg-viewer --bench VOLUME` (first image, scrolling
// in 1x3 and 2x2, crosshair; runRedrawBench, window 1400x860 unless --size, 200 steps unless
// --frames) and exits. Without a display (no DISPLAY / WAYLAND_DISPLAY / QT_QPA_PLATFORM) it runs
// on the offscreen platform with a message (no 3D view there).
//
// Without a path it generates a 512x512x500 int16 CT phantom (bench/ct_phantom.h). It opens the
// real MainWindow (1x3 layout, 1920x1080, docks shown), then measures: the first image (setStudy ->
// all three views painted and flushed: default window, slice rendering, scaling), slice scrolling
// in each view (state->moveSlice, then the event loop until the view has painted: render +
// window/level + overlay + scaled blit + flush to the X server), the same with a label overlay, and
// with --3d the surface build and 3D view redraws (2x2 layout, OpenGL; Mesa llvmpipe under Xvfb),
// with --edit brush strokes, undo/redo, fill between slices and (with --3d) the re-mesh of an
// edited label (ui/bench/redraw_bench.h runEditBench).
#include "bench/ct_phantom.h"
#include "pipeline/segment.h"
#include "ui/bench/redraw_bench.h"
#include "ui/edit_controller.h"
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
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace voxseg;
using namespace voxseg::ui;

using Stats = RedrawStats;

void printRow(const char* what, const Stats& s) {
    std::fputs(redrawTableRow(what, s).c_str(), stdout);
    std::fflush(stdout);
}

Stats scroll(MainWindow& w, ViewAxis axis, int frames) { return scrollSteps(w, axis, frames); }
Stats crosshair(MainWindow& w, int frames) { return crosshairSteps(w, frames); }

double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// voxseg_bench_viewer --redraw VOLUME: the report voxseg-viewer --bench printed before the
// benchmark code left the product.
int runRedraw(const std::string& path, int frames, int width, int height) {
    if (path.empty()) {
        std::fprintf(stderr,
                     "voxseg_bench_viewer: --redraw needs a VOLUME (image or DICOM folder)\n");
        return 2;
    }
    auto study = pipeline::loadStudy(path, "", {});
    if (!study.isOk()) {
        std::fprintf(stderr, "voxseg_bench_viewer: %s\n", study.status().toString().c_str());
        return 1;
    }
    MainWindow window;
    window.setInteractive(false);
    window.resize(width, height);
    window.show();
    const std::string report =
        runRedrawBench(window, std::move(study.value()), path, std::max(1, frames));
    std::fputs(report.c_str(), stdout);
    return 0;
}

struct Options {
    std::string path;
    int frames = -1;  // 300 for the full run, 200 for --redraw (voxseg-viewer --bench's default)
    bool with_3d = false;
    bool with_edit = false;
    bool redraw = false;
    int width = 1400, height = 860;
};

// nullopt (after a message) for a --size that is not WxH.
std::optional<Options> parseOptions(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--frames" && i + 1 < argc)
            o.frames = std::stoi(argv[++i]);
        else if (a == "--3d")
            o.with_3d = true;
        else if (a == "--edit")
            o.with_edit = true;
        else if (a == "--redraw")
            o.redraw = true;
        else if (a == "--size" && i + 1 < argc) {
            if (std::sscanf(argv[++i], "%dx%d", &o.width, &o.height) != 2 || o.width <= 0 ||
                o.height <= 0) {
                std::fprintf(stderr,
                             "voxseg_bench_viewer: --size %s: expected WxH, e.g. 1920x1080\n",
                             argv[i]);
                return std::nullopt;
            }
        } else
            o.path = a;
    }
    return o;
}

// The study at `path`, or the generated 512x512x500 CT phantom without one; false (after the
// error) when it cannot be loaded.
bool loadVolume(const std::string& path, pipeline::StudyInput& study) {
    if (path.empty()) {
        const auto t0 = Clock::now();
        study.volume = bench::makeCtPhantom(512, 512, 500);
        study.volume.info().modality = "CT";
        std::printf("phantom generated in %.1f s\n", ms(t0, Clock::now()) / 1000);
        return true;
    }
    auto r = pipeline::loadStudy(path, "", {});
    if (!r.isOk()) {
        std::fprintf(stderr, "%s\n", r.status().toString().c_str());
        return false;
    }
    study = std::move(r.value());
    return true;
}

// A label overlay: thresholds of the image (lungs and bone on the phantom).
Volume thresholdLabels(const Volume& image) {
    const Geometry g = image.geometry();
    Volume labels = Volume::allocate<uint8_t>(g);
    visitPixels(image, [&](const auto* p) {
        uint8_t* l = labels.data<uint8_t>();
        for (int64_t i = 0; i < g.voxelCount(); ++i)
            l[i] = p[i] < -500 && p[i] > -950 ? 1 : (p[i] > 300 ? 2 : 0);
    });
    return labels;
}

// The slice + window part of one frame alone (CPU ms).
void printSliceParts(MainWindow& w, const Volume& volume) {
    const int reps = 50;
    for (auto axis : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal}) {
        const SliceFrame& f = w.state()->frame(axis);
        std::vector<uint32_t> argb(static_cast<size_t>(f.width * f.height));
        const double c0 = threadCpuMs();
        for (int r = 0; r < reps; ++r)
            renderSlice(volume, f, (r * 7) % f.depth, w.state()->window(), argb.data());
        const double render = (threadCpuMs() - c0) / reps;
        std::printf("parts, %s: slice + window (renderSlice) %.2f ms CPU\n", viewAxisName(axis),
                    render);
    }
    // One sagittal SlabCache block (32 slices copied slice-major), built afresh each time.
    const SliceFrame& f = w.state()->frame(ViewAxis::kSagittal);
    std::vector<uint32_t> argb(static_cast<size_t>(f.width * f.height));
    const int blocks = std::max<int64_t>(1, f.depth / SlabCache::kSlices);
    SlabCache cache;
    const double c0 = threadCpuMs();
    for (int b = 0; b < blocks; ++b)
        cache.render(volume, f, b * SlabCache::kSlices, w.state()->window(), argb.data());
    std::printf("parts, sagittal: one %lld-slice block built + rendered (SlabCache) %.2f ms CPU\n",
                static_cast<long long>(SlabCache::kSlices), (threadCpuMs() - c0) / blocks);
    std::printf("\n");
}

// The overlay part of one sagittal frame alone (CPU ms): read from the volume vs the runs.
void printOverlayParts(MainWindow& w) {
    const SliceFrame& f = w.state()->frame(ViewAxis::kSagittal);
    std::vector<uint32_t> argb(static_cast<size_t>(f.width * f.height), 0xFF000000u);
    for (bool use_runs : {false, true}) {
        const LabelRuns* runs = use_runs ? w.state()->labelRuns() : nullptr;
        const int reps = 50;
        const double c0 = threadCpuMs();
        for (int r = 0; r < reps; ++r)
            blendLabels(w.state()->labelMap(), f, (r * 7) % f.depth, w.state()->labelColors(),
                        OverlayMode::kFill, argb.data(), &w.state()->labelBounds(), runs);
        std::printf("parts, sagittal: fill overlay (blendLabels) from the %s %.2f ms CPU\n",
                    use_runs ? "runs" : "volume", (threadCpuMs() - c0) / reps);
    }
}

// --3d: the surface build, rotation steps with and without decimation, the full-mesh frame on
// release; `overlay_rows` (when given) the overlay scroll rows with the 3D view shown.
void run3dBench(MainWindow& w, int frames,
                const std::function<void(const std::string&)>& overlay_rows) {
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
        if (overlay_rows) overlay_rows("2x2 (3D shown)");
        // One rotation step = a frame rendered by OpenGL into the view's framebuffer object
        // and read back (what a mouse drag costs), then painted.
        size_t coarse = 0;
        for (const auto& m : surface->interactionMeshes()) coarse += m.triangleCount();
        std::printf("3D: %zu triangles drawn while rotating\n", coarse);
        for (bool decimate : {false, true}) {
            surface->setDecimateWhileInteracting(decimate);
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
            Stats st = summarizeTimes(times, threadCpuMs() - cpu0);
            printRow(decimate ? "3D view: rotate one step (2x2), decimated while dragging"
                              : "3D view: rotate one step (2x2), full mesh",
                     st);
        }
        // Releasing the mouse draws the full meshes once.
        {
            const QPoint c = surface->rect().center();
            QMouseEvent release(QEvent::MouseButtonRelease, c, surface->mapToGlobal(c),
                                Qt::LeftButton, Qt::NoButton, Qt::NoModifier);
            const auto t = Clock::now();
            QApplication::sendEvent(&*surface, &release);
            surface->repaint();
            std::printf("3D: full-mesh frame on release: %.1f ms\n", ms(t, Clock::now()));
        }
    }
}

bool displaySet() {
    for (const char* name : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) {
        const char* v = std::getenv(name);
        if (v && *v) return true;
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (!displaySet()) {
        std::fprintf(stderr,
                     "voxseg_bench_viewer: no display (DISPLAY and WAYLAND_DISPLAY unset): using "
                     "the offscreen platform (no 3D view); run under xvfb-run for OpenGL\n");
        setenv("QT_QPA_PLATFORM", "offscreen", 1);
    }
    QApplication app(argc, argv);
    QApplication::setOrganizationName("voxseg-bench");
    QApplication::setApplicationName("voxseg-bench-viewer");
    const std::optional<Options> options = parseOptions(argc, argv);
    if (!options) return 2;
    int frames = options->frames;
    const bool with_3d = options->with_3d, with_edit = options->with_edit;
    if (options->redraw)
        return runRedraw(options->path, frames < 0 ? 200 : frames, options->width, options->height);
    if (frames < 0) frames = 300;

    pipeline::StudyInput study;
    const std::string what =
        options->path.empty() ? "generated 512x512x500 int16 CT phantom" : options->path;
    if (!loadVolume(options->path, study)) return 1;
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
        "| step, bilinear (wall ms; cpu = GUI thread CPU ms) |    mean |     p50 |     p95 |     "
        "max "
        "|     cpu |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    const auto kAxes = {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal};
    auto name = [](const std::string& layout, ViewAxis axis, const char* rest) {
        return layout + " " + viewAxisName(axis) + ", " + rest;
    };
    // "before": every slice read straight from the volume; "after": through the views' SlabCache
    // (and, with labels, the label runs).
    auto plainRows = [&](const std::string& layout) {
        for (auto axis : kAxes)
            for (bool after : {false, true}) {
                for (int a = 0; a < 3; ++a)
                    w.view(static_cast<ViewAxis>(a))->setUseSlabCache(after);
                const SlabCache& cache = w.view(axis)->slabCache();
                const int64_t built = cache.blocksBuilt(), taken = cache.blocksPrefetched();
                printRow(
                    name(layout, axis, after ? "no overlay, after" : "no overlay, before").c_str(),
                    scroll(w, axis, frames));
                if (after && cache.blocksBuilt() + cache.blocksPrefetched() > built + taken)
                    std::printf(
                        "  (%s: %lld slab blocks built while the view waited, %lld taken "
                        "from the background build)\n",
                        viewAxisName(axis), static_cast<long long>(cache.blocksBuilt() - built),
                        static_cast<long long>(cache.blocksPrefetched() - taken));
            }
    };
    // --edit: only the editing timings (the redraw rows are the default run's).
    const bool scroll_rows = !with_edit;
    if (scroll_rows) {
        plainRows("1x3");
        for (int a = 0; a < 3; ++a) w.view(static_cast<ViewAxis>(a))->setSmooth(false);
        printRow("1x3 axial, nearest, no overlay", scroll(w, ViewAxis::kAxial, frames));
        printRow("crosshair drag (all three views), no overlay", crosshair(w, frames));
        for (int a = 0; a < 3; ++a) w.view(static_cast<ViewAxis>(a))->setSmooth(true);
        w.setLayoutMode(MainWindow::Layout::k2x2);
        QTest::qWait(200);
        plainRows("2x2");
        w.setLayoutMode(MainWindow::Layout::k1x3);
        QTest::qWait(200);
        printSliceParts(w, study.volume);
    }

    const Volume labels = thresholdLabels(study.volume);
    const auto tl = Clock::now();
    const Status st =
        w.state()->setLabelMap(labels, {{1, "lung", {80, 160, 255}}, {2, "bone", {240, 220, 120}}});
    if (!st.isOk()) std::fprintf(stderr, "%s\n", st.toString().c_str());
    const double label_ms = ms(tl, Clock::now());
    // "before": image and labels read straight from the volumes; "after": the views' SlabCache
    // and the label map's runs (what the viewer does).
    auto overlayRows = [&](const std::string& layout) {
        for (auto axis : kAxes)
            for (bool after : {false, true}) {
                w.state()->setUseLabelRuns(after);
                for (int a = 0; a < 3; ++a)
                    w.view(static_cast<ViewAxis>(a))->setUseSlabCache(after);
                printRow(name(layout, axis, after ? "fill overlay, after" : "fill overlay, before")
                             .c_str(),
                         scroll(w, axis, frames));
            }
    };
    if (scroll_rows) {
        overlayRows("1x3");
        w.state()->setOverlayMode(OverlayMode::kOutline);
        printRow("1x3 axial, outline overlay", scroll(w, ViewAxis::kAxial, frames));
        printRow("1x3 sagittal, outline overlay, after", scroll(w, ViewAxis::kSagittal, frames));
        w.state()->setOverlayMode(OverlayMode::kFill);
        for (bool use_runs : {false, true}) {
            w.state()->setUseLabelRuns(use_runs);
            for (int a = 0; a < 3; ++a) w.view(static_cast<ViewAxis>(a))->setUseSlabCache(use_runs);
            printRow(use_runs ? "crosshair drag (all three views), fill, after"
                              : "crosshair drag (all three views), fill, before",
                     crosshair(w, frames));
        }
        if (const LabelRuns* r = w.state()->labelRuns())
            std::printf("\nlabel runs: %zu runs, %.1f MB (label map %.1f MB)\n", r->runs.size(),
                        static_cast<double>(r->bytes()) / 1e6,
                        static_cast<double>(g.voxelCount()) / 1e6);
        printOverlayParts(w);
    }
    std::printf("\nlabel map shown (grid check + statistics on the GUI thread): %.1f ms\n",
                label_ms);

    if (with_edit) {
        std::printf("\nediting, 1x3 layout:\n\n");
        std::fputs(runEditBench(w, frames).c_str(), stdout);
        w.editController()->endSession(false);
    }

    if (with_3d)
        run3dBench(w, frames,
                   scroll_rows ? std::function<void(const std::string&)>(overlayRows) : nullptr);
    if (with_edit && with_3d) {
        // Editing (issue 18) again with the 3D view shown.
        std::printf("\nediting, 2x2 layout (3D shown):\n\n");
        std::fputs(runEditBench(w, frames).c_str(), stdout);
        w.editController()->endSession(false);
    }
    return 0;
}
