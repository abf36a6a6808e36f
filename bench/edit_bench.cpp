// Edit speed on the 512x512x500 bench volume (issue 18 item 6; docs/viewer.md "Edit journal"):
// a brush stroke step (sphere and axial disk), undo of a step, fill between slices over 100
// slices and its undo. Prints per-case median and p95 wall time. CPU only, one thread.
//   voxseg_bench_edit [steps=200]
#include "edit/label_editor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace voxseg;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

void report(const char* name, std::vector<double> t) {
    std::sort(t.begin(), t.end());
    const double p50 = t[t.size() / 2], p95 = t[std::min(t.size() - 1, t.size() * 95 / 100)];
    std::printf("%-40s n=%4zu  median %8.3f ms  p95 %8.3f ms  max %8.3f ms\n", name, t.size(), p50,
                p95, t.back());
}

}  // namespace

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
    Geometry g;
    g.size = {512, 512, 500};
    g.spacing = {0.7, 0.7, 1.0};
    g.origin = {-179.0, -179.0, -250.0};
    Volume image = Volume::allocate<int16_t>(g);
    auto editor = edit::LabelEditor::create(image, Volume::allocate<uint16_t>(g));
    if (!editor.isOk()) {
        std::fprintf(stderr, "%s\n", editor.status().toString().c_str());
        return 1;
    }
    for (int shape = 0; shape < 2; ++shape) {
        std::vector<double> apply_t, undo_t;
        size_t bytes = 0;
        for (int s = 0; s < steps; ++s) {
            edit::EditOp op;
            op.kind = edit::OpKind::kPaint;
            op.shape = shape == 0 ? edit::Shape::kSphere : edit::Shape::kDisk;
            op.plane = edit::Plane::kAxial;
            op.radius_mm = shape == 0 ? 5.0 : 10.0;
            op.label = 1 + s % 3;
            const double x = -60.0 + 0.6 * s, y = 20.0 * std::sin(s * 0.05);
            op.points = {{x, y, 3.0}, {x + 0.6, y + 0.4, 3.0}};  // one mouse-move step
            op.stroke = true;
            const auto t0 = Clock::now();
            auto r = editor->apply(op);
            const auto t1 = Clock::now();
            if (!r.isOk()) return 1;
            apply_t.push_back(ms(t0, t1));
            bytes += r->bytes_recorded;
        }
        for (int s = 0; s < steps; ++s) {
            const auto t0 = Clock::now();
            if (!editor->undo().isOk()) break;
            undo_t.push_back(ms(t0, Clock::now()));
        }
        report(shape == 0 ? "brush step, sphere r=5 mm" : "brush step, axial disk r=10 mm",
               apply_t);
        report("  undo of a step", undo_t);
        std::printf("  undo bytes per step: %.1f KiB (volume: %.0f MiB)\n",
                    double(bytes) / steps / 1024.0, double(g.voxelCount()) * 2 / 1048576.0);
    }
    // Fill between slices: disks of r = 60 mm drawn on every 5th axial slice over 100 slices.
    for (int k = 200; k <= 300; k += 5) {
        edit::EditOp op;
        op.kind = edit::OpKind::kPaint;
        op.shape = edit::Shape::kDisk;
        op.plane = edit::Plane::kAxial;
        op.radius_mm = 40.0 + 20.0 * std::sin((k - 200) * 0.0314);
        op.label = 5;
        op.points = {{0.0, 0.0, -250.0 + k}};
        if (!editor->apply(op).isOk()) return 1;
    }
    edit::EditOp fill;
    fill.kind = edit::OpKind::kFillBetweenSlices;
    fill.label = 5;
    fill.plane = edit::Plane::kAxial;
    const auto t0 = Clock::now();
    auto r = editor->apply(fill);
    const auto t1 = Clock::now();
    if (!r.isOk()) return 1;
    report("fill between slices, 100 slices", {ms(t0, t1)});
    std::printf("  %lld voxels filled, undo record %.1f MiB\n",
                static_cast<long long>(r->voxels_changed), double(r->bytes_recorded) / 1048576.0);
    const auto t2 = Clock::now();
    if (!editor->undo().isOk()) return 1;
    report("  undo of the fill", {ms(t2, Clock::now())});
    return 0;
}
