// Paint and erase change exactly the voxels whose centres lie in the shape, in patient LPS mm, on
// an axis-aligned, an oblique and a sagittal grid. Expectations are computed here from the
// definition (voxel centre distances), not with the library's grid arithmetic.
#include "edit/label_editor.h"
#include "tests/edit/edit_test_grids.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace voxseg::edit {
namespace {

using testing::distance;
using testing::forEachVoxel;
using testing::gridCases;
using testing::labelAt;

EditOp sphere(OpKind kind, const Vec3& c, double r, int label) {
    EditOp op;
    op.kind = kind;
    op.shape = Shape::kSphere;
    op.points = {c};
    op.radius_mm = r;
    op.label = label;
    return op;
}

// Counts voxels where the map differs from `expected(idx)`.
int64_t mismatches(const Volume& labels, const std::function<int(int64_t, Vec3)>& expected,
                   const std::function<bool(Vec3)>& dont_care = nullptr) {
    int64_t bad = 0;
    forEachVoxel(labels.geometry(), [&](int64_t, int64_t, int64_t, int64_t idx, Vec3 p) {
        if (dont_care && dont_care(p)) return;
        if (labelAt(labels, idx) != expected(idx, p)) ++bad;
    });
    return bad;
}

TEST(Brush, SphereIsTheVoxelsWithinRadius) {
    for (const auto& g : gridCases()) {
        SCOPED_TRACE(g.name);
        auto editor =
            LabelEditor::create(testing::makeImage(g.geometry), testing::makeLabels(g.geometry));
        ASSERT_TRUE(editor.isOk()) << editor.status().toString();
        const Vec3 c = testing::gridCentre(g.geometry);
        const double r = 6.3;
        auto rep = editor->apply(sphere(OpKind::kPaint, c, r, 3));
        ASSERT_TRUE(rep.isOk()) << rep.status().toString();
        int64_t inside = 0;
        EXPECT_EQ(mismatches(editor->labelMap(),
                             [&](int64_t, Vec3 p) {
                                 const bool in = distance(p, c) <= r;
                                 inside += in;
                                 return in ? 3 : 0;
                             }),
                  0);
        EXPECT_GT(inside, 500);
        EXPECT_EQ(rep->voxels_changed, inside);

        // Erasing a smaller sphere inside leaves a shell.
        ASSERT_TRUE(editor->apply(sphere(OpKind::kErase, c, 3.1, 0)).isOk());
        EXPECT_EQ(mismatches(editor->labelMap(),
                             [&](int64_t, Vec3 p) {
                                 const double d = distance(p, c);
                                 return d <= r && d > 3.1 ? 3 : 0;
                             }),
                  0);
    }
}

// The patient axis (0 = x, 1 = y, 2 = z) a plane is normal to.
int normalAxis(Plane p) { return p == Plane::kAxial ? 2 : p == Plane::kCoronal ? 1 : 0; }

// Ops built in code skip the journal's +/-1 km check: a centre or radius of any size must give an
// empty or clipped box, never an overflowing index (UBSan fails this test otherwise).
TEST(Brush, FarCentresAndHugeRadiiStayWithinTheGrid) {
    const auto g = gridCases()[0].geometry;
    auto editor = LabelEditor::create(testing::makeImage(g), testing::makeLabels(g));
    ASSERT_TRUE(editor.isOk()) << editor.status().toString();
    for (const double far : {4.4e25, -1e300, std::numeric_limits<double>::quiet_NaN()}) {
        auto rep = editor->apply(sphere(OpKind::kPaint, {far, 2, 1}, 1.5, 2));
        ASSERT_TRUE(rep.isOk()) << far << ": " << rep.status().toString();
        EXPECT_EQ(rep->voxels_changed, 0) << far;
    }
    // A radius larger than any image paints every voxel.
    auto all = editor->apply(sphere(OpKind::kPaint, testing::gridCentre(g), 1e300, 2));
    ASSERT_TRUE(all.isOk()) << all.status().toString();
    EXPECT_EQ(all->voxels_changed, g.voxelCount());
}

TEST(Brush, DiskLiesInTheNearestGridSliceOfItsPlane) {
    for (const auto& g : gridCases()) {
        for (Plane plane : {Plane::kAxial, Plane::kCoronal, Plane::kSagittal}) {
            SCOPED_TRACE(g.name + " plane " + std::to_string(int(plane)));
            const Geometry& geo = g.geometry;
            auto editor = LabelEditor::create(testing::makeImage(geo), testing::makeLabels(geo));
            ASSERT_TRUE(editor.isOk());
            const Vec3 c = testing::gridCentre(geo);
            const double r = 7.7;
            EditOp op = sphere(OpKind::kPaint, c, r, 2);
            op.shape = Shape::kDisk;
            op.plane = plane;
            ASSERT_TRUE(editor->apply(op).isOk());
            const int n = normalAxis(plane);
            int64_t inside = 0;
            if (g.name != "oblique") {
                // Grid slices are patient planes: the disk is the voxels in the slice whose
                // patient coordinate along the normal is nearest to the centre's, within r of the
                // centre in the plane.
                double nearest = 1e9;
                forEachVoxel(geo, [&](int64_t, int64_t, int64_t, int64_t, Vec3 p) {
                    nearest = std::min(nearest, std::abs(p[n] - c[n]));
                });
                EXPECT_EQ(mismatches(editor->labelMap(),
                                     [&](int64_t, Vec3 p) {
                                         if (std::abs(std::abs(p[n] - c[n]) - nearest) > 1e-6)
                                             return 0;
                                         Vec3 d{p[0] - c[0], p[1] - c[1], p[2] - c[2]};
                                         d[n] = 0;
                                         const bool in = std::sqrt(dot(d, d)) <= r;
                                         inside += in;
                                         return in ? 2 : 0;
                                     }),
                          0);
            } else {
                // Oblique: the slice of the index axis closest to the plane's normal, holding the
                // centre's nearest slice; the centre moved along that axis into the slice.
                int axis = 0;
                for (int a = 1; a < 3; ++a)
                    if (std::abs(geo.direction[3 * n + a]) > std::abs(geo.direction[3 * n + axis]))
                        axis = a;
                Vec3 ci = geo.physicalToIndex(c);
                const double s = std::round(ci[axis]);
                ci[axis] = s;
                const Vec3 moved = geo.indexToPhysical(ci);
                EXPECT_EQ(mismatches(editor->labelMap(),
                                     [&](int64_t, Vec3 p) {
                                         const Vec3 ip = geo.physicalToIndex(p);
                                         if (std::abs(ip[axis] - s) > 1e-6) return 0;
                                         const bool in = distance(p, moved) <= r;
                                         inside += in;
                                         return in ? 2 : 0;
                                     }),
                          0);
            }
            EXPECT_GT(inside, 60);
        }
    }
}

TEST(Brush, StrokeIsTheUnionOfSpheresAlongIt) {
    for (const auto& g : gridCases()) {
        SCOPED_TRACE(g.name);
        auto editor =
            LabelEditor::create(testing::makeImage(g.geometry), testing::makeLabels(g.geometry));
        ASSERT_TRUE(editor.isOk());
        const Vec3 c = testing::gridCentre(g.geometry);
        const std::vector<Vec3> stroke{{c[0] - 9, c[1] - 4, c[2] - 3},
                                       {c[0] + 1, c[1] + 5, c[2] + 2},
                                       {c[0] + 8, c[1] - 2, c[2] + 4}};
        EditOp op = sphere(OpKind::kPaint, c, 2.4, 1);
        op.points = stroke;
        op.stroke = true;
        ASSERT_TRUE(editor->apply(op).isOk());
        // Dense samples of the polyline; voxels within a sample step of the boundary are not
        // judged (the sampled distance overestimates by at most half a step).
        std::vector<Vec3> samples;
        for (size_t s = 0; s + 1 < stroke.size(); ++s)
            for (int t = 0; t <= 4000; ++t) {
                const double f = t / 4000.0;
                samples.push_back({stroke[s][0] + f * (stroke[s + 1][0] - stroke[s][0]),
                                   stroke[s][1] + f * (stroke[s + 1][1] - stroke[s][1]),
                                   stroke[s][2] + f * (stroke[s + 1][2] - stroke[s][2])});
            }
        auto nearest = [&](Vec3 p) {
            double best = 1e9;
            for (const Vec3& q : samples) best = std::min(best, distance(p, q));
            return best;
        };
        const double step = 0.01;
        int64_t inside = 0;
        EXPECT_EQ(mismatches(
                      editor->labelMap(),
                      [&](int64_t, Vec3 p) {
                          if (distance(p, c) > 16) return 0;  // the stroke reaches 13 mm
                          const bool in = nearest(p) <= 2.4;
                          inside += in;
                          return in ? 1 : 0;
                      },
                      [&](Vec3 p) {
                          if (distance(p, c) > 20) return false;
                          const double d = nearest(p);
                          return d > 2.4 - step && d <= 2.4 + step;
                      }),
                  0);
        EXPECT_GT(inside, 300);
    }
}

TEST(Brush, IntensityRangeAndOverwritePolicyMaskThePaint) {
    for (const auto& g : gridCases()) {
        SCOPED_TRACE(g.name);
        const Geometry& geo = g.geometry;
        Volume image = testing::makeImage(geo);
        Volume labels = testing::makeLabels(geo);
        const Vec3 c = testing::gridCentre(geo);
        // Label 2 on the patient-left half (x > c.x), label 4 in a slab.
        forEachVoxel(geo, [&](int64_t, int64_t, int64_t, int64_t idx, Vec3 p) {
            if (p[0] > c[0]) labels.data<uint8_t>()[idx] = 2;
            if (std::abs(p[1] - c[1]) < 1.5) labels.data<uint8_t>()[idx] = 4;
        });
        const int16_t* hu = image.data<int16_t>();
        const double lo = 200, hi = 300;
        for (const auto& [each_policy, name] : std::vector<std::pair<Overwrite, std::string>>{
                 {{Overwrite::Mode::kAll, 0}, "all"},
                 {{Overwrite::Mode::kBackground, 0}, "bg"},
                 {{Overwrite::Mode::kLabel, 2}, "label:2"}}) {
            SCOPED_TRACE(name);
            const Overwrite policy = each_policy;  // a lambda captures it (clang 14: no binding)
            auto editor = LabelEditor::create(image, labels);
            ASSERT_TRUE(editor.isOk());
            EditOp op = sphere(OpKind::kPaint, c, 8.2, 1);
            op.min = lo;
            op.max = hi;
            op.overwrite = policy;
            ASSERT_TRUE(editor->apply(op).isOk());
            int64_t painted = 0;
            EXPECT_EQ(
                mismatches(editor->labelMap(),
                           [&](int64_t idx, Vec3 p) {
                               const int before = labels.data<uint8_t>()[idx];
                               const bool allowed =
                                   policy.mode == Overwrite::Mode::kAll ||
                                   (policy.mode == Overwrite::Mode::kBackground && before == 0) ||
                                   (policy.mode == Overwrite::Mode::kLabel && before == 2);
                               const bool in = distance(p, c) <= 8.2 && hu[idx] >= lo &&
                                               hu[idx] <= hi && allowed;
                               painted += in && before != 1;
                               return in ? 1 : before;
                           }),
                0);
            EXPECT_GT(painted, 10);
        }
        // Erase of one label only.
        auto editor = LabelEditor::create(image, labels);
        ASSERT_TRUE(editor.isOk());
        ASSERT_TRUE(editor->apply(sphere(OpKind::kErase, c, 8.2, 2)).isOk());
        EXPECT_EQ(mismatches(editor->labelMap(),
                             [&](int64_t idx, Vec3 p) {
                                 const int before = labels.data<uint8_t>()[idx];
                                 return before == 2 && distance(p, c) <= 8.2 ? 0 : before;
                             }),
                  0);
    }
}

TEST(Brush, StrokeUndoMemoryIsBoundedByTheVoxelsChanged) {
    Geometry g;
    g.size = {512, 512, 200};
    g.spacing = {0.7, 0.7, 1.0};
    Volume image = Volume::allocate<int16_t>(g);
    auto editor = LabelEditor::create(image, Volume::allocate<uint16_t>(g));
    ASSERT_TRUE(editor.isOk());
    EditOp op = sphere(OpKind::kPaint, {150.0, 160.0, 100.0}, 5.0, 1);
    op.points = {{150, 160, 100}, {158, 163, 100}, {165, 170, 101}};
    op.stroke = true;
    auto r = editor->apply(op);
    ASSERT_TRUE(r.isOk());
    const size_t volume_bytes = size_t(g.voxelCount()) * 2;
    EXPECT_GT(r->voxels_changed, 1000);
    // Each changed voxel lies in a recorded tile; the tiles are few.
    EXPECT_LE(r->bytes_recorded, size_t(2 * 2 * 32 * 32 * 32) * 12);
    EXPECT_LT(editor->historyBytes() * 1000, volume_bytes)
        << editor->historyBytes() << " bytes for a " << volume_bytes << "-byte volume";
    // Tiles the stroke only touches keep their changed voxels alone (8 bytes each).
    EXPECT_LE(editor->historyBytes(), size_t(r->voxels_changed) * 8 + 2 * 2 * 32 * 32 * 32)
        << r->voxels_changed << " voxels changed";
    std::printf("stroke: %lld voxels changed, %zu history bytes\n",
                static_cast<long long>(r->voxels_changed), editor->historyBytes());
    RecordProperty("undo_bytes", std::to_string(editor->historyBytes()));
    // The sparse record restores a uint16 map exactly.
    ASSERT_TRUE(editor->undo().isOk());
    const uint16_t* d = editor->labelMap().data<uint16_t>();
    EXPECT_EQ(std::count_if(d, d + g.voxelCount(), [](uint16_t v) { return v != 0; }), 0);
    ASSERT_TRUE(editor->redo().isOk());
    EXPECT_EQ(std::count_if(d, d + g.voxelCount(), [](uint16_t v) { return v == 1; }),
              r->voxels_changed);
}

}  // namespace
}  // namespace voxseg::edit
