// What the viewer tests share: the CT phantom series they open (written as real DICOM files),
// and running a background task of the main window to its end.
#pragma once

#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "tests/test_data.h"
#include "ui/main_window.h"

#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>

#include <cmath>
#include <functional>
#include <string>

namespace voxseg::ui {

constexpr int kTaskTimeoutMs = 120000;
constexpr int kColumns = 40, kRows = 32, kSlices = 24;

// Shows `w` at width x height, non-interactive, and makes it the active window (the tool and
// review keys are window shortcuts; Xvfb has no window manager): a fatal test failure if it is
// not exposed and active (callers ASSERT_NO_FATAL_FAILURE).
inline void showActive(MainWindow& w, int width, int height) {
    w.setInteractive(false);
    w.resize(width, height);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
}

// A CT phantom: air, an elliptic body (40 HU), a dense sphere (300 HU) off-centre.
inline int32_t phantomHu(int i, int j, int k) {
    const double x = (i - kColumns / 2.0) / (kColumns * 0.4), y = (j - kRows / 2.0) / (kRows * 0.4);
    if (x * x + y * y >= 1) return -1000;
    if (std::hypot(i - 14.0, j - 18.0, k - 12.0) < 5) return 300;
    return 40;
}

// The phantom as an axial series (or with the orientation `adjust` gives it) in dir/<name>.
inline std::string writeSeries(const testing::TempDir& dir, const std::string& name = "series",
                               const std::function<void(io::SynthSeriesSpec&)>& adjust = {}) {
    io::SynthSeriesSpec spec;
    spec.columns = kColumns;
    spec.rows = kRows;
    spec.slices = kSlices;
    spec.column_spacing = 0.9;
    spec.row_spacing = 0.9;
    spec.slice_spacing = 1.5;
    spec.intercept = -1024;
    spec.value = [](int i, int j, int k) { return phantomHu(i, j, k) + 1024; };
    if (adjust) adjust(spec);
    const std::string folder = dir / name;
    auto files = io::writeSynthSeries(spec, folder);
    EXPECT_TRUE(files.isOk()) << files.status().toString();
    return folder;
}

// The phantom's label map on `grid` (the phantom's): label 1 = the dense sphere, label 2 = a box
// in the body; written to `path`.
inline std::string writePhantomLabelMap(const Geometry& grid, const std::string& path) {
    Volume labels = Volume::allocate<uint8_t>(grid);
    uint8_t* p = labels.data<uint8_t>();
    for (int k = 0; k < kSlices; ++k)
        for (int j = 0; j < kRows; ++j)
            for (int i = 0; i < kColumns; ++i) {
                uint8_t v = 0;
                if (phantomHu(i, j, k) == 300) v = 1;
                if (i >= 24 && i < 30 && j >= 10 && j < 16 && k >= 4 && k < 20) v = 2;
                p[(k * kRows + j) * kColumns + i] = v;
            }
    EXPECT_TRUE(io::writeImage(labels, path).isOk());
    return path;
}

struct TaskResult {
    bool finished = false;
    bool ok = false;
    QString message;
};

inline TaskResult runTask(MainWindow& w, const std::function<void()>& start,
                          int timeout_ms = kTaskTimeoutMs) {
    QSignalSpy spy(&w, &MainWindow::taskFinished);
    start();
    TaskResult r;
    r.finished = QTest::qWaitFor([&] { return spy.count() > 0; }, timeout_ms);
    if (r.finished) {
        r.ok = spy.front()[0].toBool();
        r.message = spy.front()[1].toString();
    }
    return r;
}

}  // namespace voxseg::ui
