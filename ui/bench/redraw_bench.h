// Redraw timings of the viewer on its real main window: the first image after a volume is
// shown, and scroll / crosshair steps (what the wheel, the keys and a drag call, until the views
// have painted and flushed to the window system). Benchmark code, not the product: library
// voxseg_ui_bench, used by voxseg_bench_viewer (ui/bench/viewer_bench.cpp, docs/perf-viewer.md)
// and the viewer tests; voxseg_ui and voxseg-viewer never include it. Results are returned as
// text (Markdown table rows); the caller prints them. GUI thread only; the window must be shown.
// Units: milliseconds; "cpu" is the GUI thread's CPU time per step (CLOCK_THREAD_CPUTIME_ID).
#pragma once

#include "pipeline/segment.h"
#include "ui/mpr_slice.h"

#include <string>
#include <vector>

namespace voxseg::ui {

class MainWindow;
class MprView;

struct RedrawStats {
    double mean = 0, p50 = 0, p95 = 0, max = 0;
    double cpu_mean = 0;
};

double threadCpuMs();
RedrawStats summarizeTimes(std::vector<double> wall_ms, double cpu_ms_total);
// Runs the event loop until each view has painted once more (at most 10 s).
void waitForPaint(const std::vector<MprView*>& views);
// `frames` steps of one view back and forth (ViewerState::moveSlice, then the paint).
RedrawStats scrollSteps(MainWindow& window, ViewAxis axis, int frames);
// In-plane crosshair moves in the axial view: the coronal and sagittal views change slice.
RedrawStats crosshairSteps(MainWindow& window, int frames);

std::string redrawTableHeader();
std::string redrawTableRow(const std::string& what, const RedrawStats& stats);

// Editing timings on the shown study (issue 18 targets): brush stroke steps (a mouse move in the
// axial view until the three views have painted), undo and redo of a stroke (until the views
// whose slice it crosses have painted), fill between slices over 100 axial slices, and, when
// the 3D view is shown, the re-mesh of the edited label (edit -> surfaces ready). Returns
// Markdown table rows and lines.
std::string runEditBench(MainWindow& window, int frames);

// voxseg_bench_viewer --redraw (formerly voxseg-viewer --bench): shows `study` in `window`, times
// the first image and scrolling in the three views (1x3 and 2x2) and the crosshair, and returns
// the report.
std::string runRedrawBench(MainWindow& window, pipeline::StudyInput study, const std::string& what,
                           int frames);

}  // namespace voxseg::ui
