// voxseg-viewer: the Qt desktop viewer. Usage:
//   voxseg-viewer [image-or-dicom-folder] [--segmentation FILE] [--model FOLDER]
//                 [--layout 1x3|2x2] [--window auto|"CT lung"|W,L] [--cursor I,J,K]
//                 [--outline] [--size WxH] [--screenshot OUT.png [--whole-window]]
// The window opens as it was last closed (size, docks, layout; the first time maximised, in 2x2:
// ui/window_settings.h) unless --size or --screenshot is given (then 2x2 at that size, default
// 1400x860, whatever the last session left); --layout overrides the layout. With --screenshot it
// loads everything given, saves a PNG of the window and exits (docs, CI).
// Without a display (no DISPLAY / WAYLAND_DISPLAY and no QT_QPA_PLATFORM) it says so and exits
// with 2, or, for --screenshot, falls back to the offscreen platform with a message (no 3D view
// there). The redraw timings that were `--bench VOLUME` are the benchmark driver's now
// (voxseg_bench_viewer --redraw VOLUME, ui/bench/); --bench says so and exits with 2.
#include "core/log.h"
#include "core/malloc_tuning.h"
#include "core/openmp_wait.h"
#include "io/dcmtk_log.h"
#include "ui/main_window.h"
#include "ui/mpr_view.h"
#include "ui/surface_view.h"
#include "ui/viewer_state.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>

namespace {

using voxseg::ui::MainWindow;

// Runs the command line's steps one after another; each async step waits for taskFinished.
class Script : public QObject {
  public:
    explicit Script(MainWindow* w) : w_(w) {
        connect(w, &MainWindow::taskFinished, this, [this](bool ok, const QString& message) {
            if (!waiting_) return;
            waiting_ = false;
            if (!ok) {
                std::fprintf(stderr, "voxseg-viewer: %s\n", qPrintable(message));
                failed_ = true;
            }
            QTimer::singleShot(0, this, [this] { next(); });
        });
    }
    void addAsync(std::function<void()> step) { steps_.push_back({std::move(step), true}); }
    void addSync(std::function<void()> step) { steps_.push_back({std::move(step), false}); }
    void start() {
        QTimer::singleShot(0, this, [this] { next(); });
    }
    bool failed() const { return failed_; }

  private:
    void next() {
        if (steps_.empty()) return;
        auto [step, async] = std::move(steps_.front());
        steps_.pop_front();
        waiting_ = async;
        step();
        if (!async) QTimer::singleShot(0, this, [this] { next(); });
    }
    MainWindow* w_;
    std::deque<std::pair<std::function<void()>, bool>> steps_;
    bool waiting_ = false;
    bool failed_ = false;
};

// Qt aborts with a terse "could not connect to display" when no platform can start; say what to
// do instead. Returns false when the viewer cannot run.
bool checkDisplay(int argc, char** argv) {
    const auto set = [](const char* name) {
        const char* v = std::getenv(name);
        return v && *v;
    };
    if (set("QT_QPA_PLATFORM") || set("DISPLAY") || set("WAYLAND_DISPLAY")) return true;
#if defined(__APPLE__) || defined(_WIN32)
    return true;
#endif
    bool headless_ok = false, help = false, moved = false;
    for (int i = 1; i < argc; ++i) {
        headless_ok |= !std::strcmp(argv[i], "--screenshot");
        moved |= !std::strcmp(argv[i], "--bench");
        help |= !std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h") ||
                !std::strcmp(argv[i], "--version");
    }
    if (headless_ok || help || moved) {  // moved: main() only says where --bench went
        if (!help && !moved)
            std::fprintf(stderr,
                         "voxseg-viewer: no display (DISPLAY and WAYLAND_DISPLAY unset): using "
                         "the offscreen platform (no 3D view); run under xvfb-run for OpenGL\n");
        setenv("QT_QPA_PLATFORM", "offscreen", 1);
        return true;
    }
    std::fprintf(stderr,
                 "voxseg-viewer: no display: DISPLAY and WAYLAND_DISPLAY are not set. Run it in a "
                 "desktop session, over ssh -X, or headless with xvfb-run -a voxseg-viewer ...; "
                 "QT_QPA_PLATFORM=offscreen works for --screenshot\n");
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    voxseg::usePassiveOpenMpWaiting(argv);  // may re-execute the program (core/openmp_wait.h)
    voxseg::keepLargeAllocationsMapped();   // flat, repeatable peak memory (core/malloc_tuning.h)
    if (!checkDisplay(argc, argv)) return 2;
    QApplication::setHighDpiScaleFactorRoundingPolicy(
        Qt::HighDpiScaleFactorRoundingPolicy::PassThrough);
    QApplication app(argc, argv);
    QApplication::setOrganizationName("voxseg");
    QApplication::setApplicationName("voxseg-viewer");
    QApplication::setApplicationVersion(VOXSEG_VERSION);
    voxseg::io::configureDcmtkLogging(false);  // DCMTK's errors only; ours go to the log panel

    QCommandLineParser parser;
    parser.setApplicationDescription("voxseg-viewer: review and run segmentations");
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument("input", "DICOM folder or image file (.nii.gz .nrrd .mha)");
    parser.addOption({"segmentation", "Label map or DICOM SEG to show", "file"});
    parser.addOption({"model", "Model package to run on the input", "folder"});
    parser.addOption(
        {"layout", "1x3 or 2x2 (default: as last time; 2x2 the first time)", "layout"});
    parser.addOption({"window", "auto, a preset (\"CT lung\") or W,L", "window"});
    parser.addOption({"cursor", "Crosshair voxel I,J,K", "ijk"});
    parser.addOption({"outline", "Draw labels as outlines"});
    parser.addOption(
        {"size", "Window size WxH (default: as last time; maximised the first time)", "size"});
    parser.addOption({"screenshot", "Save a PNG of the views and exit", "png"});
    parser.addOption({"whole-window", "Screenshot the whole window (docks, menus) too"});
    // Hidden: --bench moved to the benchmark driver (bench code is not part of the product).
    QCommandLineOption bench_moved(QStringLiteral("bench"), "moved", "volume");
    bench_moved.setFlags(QCommandLineOption::HiddenFromHelp);
    parser.addOption(bench_moved);
    QCommandLineOption frames_moved(QStringLiteral("frames"), "moved", "n");
    frames_moved.setFlags(QCommandLineOption::HiddenFromHelp);
    parser.addOption(frames_moved);
    parser.process(app);

    if (parser.isSet(bench_moved)) {
        std::fprintf(stderr,
                     "voxseg-viewer: --bench moved to the viewer benchmark: build it with cmake "
                     "--build build --target voxseg_bench_viewer, then run "
                     "build/bench/voxseg_bench_viewer --redraw %s [--frames N] [--size WxH] "
                     "(docs/perf-viewer.md)\n",
                     qPrintable(parser.value(bench_moved)));
        return 2;
    }

    MainWindow window;
    const bool scripted = parser.isSet("screenshot");
    window.setInteractive(!scripted);
    const QStringList size = parser.value("size").split('x');
    if (scripted || size.size() == 2) {
        // A given size (and every screenshot) does not depend on what the last session left.
        window.setLayoutMode(MainWindow::Layout::k2x2);
        if (size.size() == 2)
            window.resize(size[0].toInt(), size[1].toInt());
        else
            window.resize(1400, 860);
        window.show();
    } else {
        window.showAsLastTime();
    }
    if (parser.isSet("layout"))
        window.setLayoutMode(parser.value("layout") == "1x3" ? MainWindow::Layout::k1x3
                                                             : MainWindow::Layout::k2x2);

    Script script(&window);
    const QStringList inputs = parser.positionalArguments();
    if (!inputs.isEmpty()) script.addAsync([&] { window.openPath(inputs.front()); });
    if (parser.isSet("segmentation"))
        script.addAsync([&] { window.loadSegmentation(parser.value("segmentation")); });
    if (parser.isSet("model")) script.addAsync([&] { window.runModel(parser.value("model")); });
    script.addSync([&] {
        auto* state = window.state();
        if (parser.isSet("window")) {
            const QString w = parser.value("window");
            const QStringList wl = w.split(',');
            if (wl.size() == 2)
                state->setWindow({wl[0].toDouble(), wl[1].toDouble()});
            else if (!window.applyWindowPreset(w))
                std::fprintf(stderr, "voxseg-viewer: unknown window preset %s\n", qPrintable(w));
        }
        const QStringList c = parser.value("cursor").split(',');
        if (c.size() == 3)
            state->setCursor({c[0].toLongLong(), c[1].toLongLong(), c[2].toLongLong()});
        if (parser.isSet("outline")) state->setOverlayMode(voxseg::ui::OverlayMode::kOutline);
    });
    if (scripted) {
        script.addSync([&] {
            // Let layouts settle and the 3D view build its surfaces before grabbing.
            auto* poll = new QTimer(&app);
            auto* surface = qobject_cast<voxseg::ui::SurfaceView*>(window.surfaceView());
            QObject::connect(poll, &QTimer::timeout, &app, [&, poll, surface] {
                if (window.busy() || (surface && surface->isVisible() && surface->building()))
                    return;
                poll->stop();
                QTimer::singleShot(300, &app, [&] {
                    const auto s = window.saveScreenshot(parser.value("screenshot"),
                                                         parser.isSet("whole-window"));
                    app.exit(s.isOk() && !script.failed() ? 0 : 1);
                });
            });
            poll->start(100);
        });
    }
    script.start();
    return app.exec();
}
