// Label surfaces (marching cubes + Taubin smoothing) and the OpenGL 3D view. The view test needs
// an OpenGL context: it skips on the offscreen platform and runs as test_ui_gl under xvfb-run
// with Mesa's software rasteriser.
#include "ui/edit_controller.h"
#include "ui/surface_mesh.h"
#include "ui/surface_view.h"
#include "ui/viewer_state.h"

#include "pipeline/orientation.h"
#include "tests/pipeline/test_volumes.h"

#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace voxseg::ui {
namespace {

using testing::makeGeometry;
using testing::makeVolume;

// Label 1: a ball of radius 8 mm; label 3: a box. Anisotropic spacing and a rotated grid.
Volume twoShapes(const Geometry& g, const Vec3& centre) {
    return makeVolume<uint8_t>(g, [&](const Vec3& p) {
        const double r = testing::distance(p, centre);
        if (r < 8) return 1.0;
        if (p[0] > centre[0] + 12 && p[0] < centre[0] + 20 && std::abs(p[1] - centre[1]) < 4 &&
            std::abs(p[2] - centre[2]) < 4)
            return 3.0;
        return 0.0;
    });
}

TEST(SurfaceMesh, BallSurfaceLiesOnTheSphereInPatientCoordinates) {
    const double a = 0.4;
    const Geometry g =
        makeGeometry({48, 40, 30}, {0.9, 0.8, 1.2}, {-10, 20, 5},
                     {std::cos(a), -std::sin(a), 0, std::sin(a), std::cos(a), 0, 0, 0, 1});
    const Vec3 centre = g.indexToPhysical({18, 20, 15});
    const Volume labels = twoShapes(g, centre);
    auto meshes = buildLabelSurfaces(labels, {{1, "ball", {10, 20, 30}}});
    ASSERT_TRUE(meshes.isOk()) << meshes.status().toString();
    ASSERT_EQ(meshes->size(), 2u);
    const SurfaceMesh& ball = (*meshes)[0];
    EXPECT_EQ(ball.label, 1);
    EXPECT_EQ(ball.color, (std::array<uint8_t, 3>{10, 20, 30}));
    EXPECT_EQ((*meshes)[1].label, 3);
    ASSERT_GT(ball.triangleCount(), 100u);
    EXPECT_EQ(ball.normals.size(), ball.positions.size());
    // Every vertex within a voxel of the 8 mm sphere (smoothing rounds the stair steps).
    const double tolerance_mm = 1.3;
    double mean = 0;
    for (size_t v = 0; v < ball.positions.size(); v += 3) {
        const double r = testing::distance(
            {ball.positions[v], ball.positions[v + 1], ball.positions[v + 2]}, centre);
        ASSERT_NEAR(r, 8.0, tolerance_mm);
        mean += r;
    }
    mean /= static_cast<double>(ball.vertexCount());
    EXPECT_NEAR(mean, 8.0, 0.6);  // Taubin smoothing does not shrink the ball
    for (uint32_t i : ball.triangles) ASSERT_LT(i, ball.vertexCount());
}

// The mesh drawn while rotating: fewer triangles than the budget, still on the sphere (within a
// clustering cell), valid indices and normals.
TEST(SurfaceMesh, DecimatedBallStaysOnTheSphereWithinTheBudget) {
    const Geometry g = makeGeometry({48, 48, 48}, {0.5, 0.5, 0.5});
    const Vec3 centre = g.indexToPhysical({24, 24, 24});
    auto meshes = buildLabelSurfaces(twoShapes(g, centre), {});
    ASSERT_TRUE(meshes.isOk());
    const SurfaceMesh& ball = (*meshes)[0];
    size_t total = 0;
    for (const auto& m : *meshes) total += m.triangleCount();
    const size_t budget = total / 8;
    const auto coarse = decimateMeshes(*meshes, budget);
    ASSERT_EQ(coarse.size(), meshes->size());
    size_t coarse_total = 0;
    for (const auto& m : coarse) coarse_total += m.triangleCount();
    EXPECT_LE(coarse_total, budget);
    EXPECT_GT(coarse[0].triangleCount(), ball.triangleCount() / 40);  // still a ball, not a dot
    EXPECT_EQ(coarse[0].label, ball.label);
    EXPECT_EQ(coarse[0].normals.size(), coarse[0].positions.size());
    for (uint32_t i : coarse[0].triangles) ASSERT_LT(i, coarse[0].vertexCount());
    const double cell_tolerance_mm = 2.5;  // a vertex moves at most to its cell's mean
    for (size_t v = 0; v < coarse[0].positions.size(); v += 3) {
        const double r = testing::distance(
            {coarse[0].positions[v], coarse[0].positions[v + 1], coarse[0].positions[v + 2]},
            centre);
        ASSERT_NEAR(r, 8.0, cell_tolerance_mm);
    }
    // Under the budget: the meshes themselves.
    EXPECT_EQ(decimateMeshes(*meshes, total)[0].triangleCount(), ball.triangleCount());
}

TEST(SurfaceMesh, TaubinSmoothingRemovesNoiseWithoutShrinking) {
    // A flat grid with one raised vertex: smoothing lowers the spike, the border stays put.
    std::vector<float> pos;
    std::vector<uint32_t> tri;
    const int n = 9;
    for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x)
            pos.insert(pos.end(), {float(x), float(y), (x == 4 && y == 4) ? 3.f : 0.f});
    for (int y = 0; y + 1 < n; ++y)
        for (int x = 0; x + 1 < n; ++x) {
            const uint32_t i = y * n + x;
            tri.insert(tri.end(), {i, i + 1, i + n, i + 1, i + n + 1, i + n});
        }
    taubinSmooth(pos, tri, 10, 0.5, -0.53);
    EXPECT_LT(pos[(4 * n + 4) * 3 + 2], 1.0f);
    EXPECT_NEAR(pos[(4 * n + 4) * 3 + 0], 4.0f, 1e-3);
    const auto normals = vertexNormals(pos, tri);
    EXPECT_NEAR(std::abs(normals[2]), 1.0f, 1e-3);
}

TEST(SurfaceMesh, LargeMasksAreDownsampledAndEmptyMapsGiveNothing) {
    const Geometry g = makeGeometry({40, 40, 40}, {1, 1, 1});
    const Volume labels = twoShapes(g, {20, 20, 20});
    SurfaceOptions small;
    small.max_voxels = 2000;  // forces a step of 2 on the 16^3 ball box
    auto coarse = buildLabelSurfaces(labels, {}, small);
    auto fine = buildLabelSurfaces(labels, {});
    ASSERT_TRUE(coarse.isOk() && fine.isOk());
    EXPECT_LT((*coarse)[0].triangleCount(), (*fine)[0].triangleCount());
    auto empty = buildLabelSurfaces(Volume::allocate<uint8_t>(g), {});
    ASSERT_TRUE(empty.isOk());
    EXPECT_TRUE(empty->empty());
}

// The unsmoothed triangles of a mesh as sorted vertex triples in label-map half-voxels: what
// marching cubes made, independent of vertex order and of the grid's origin.
std::set<std::array<int64_t, 9>> rawTriangles(const SurfaceMesh& m) {
    std::set<std::array<int64_t, 9>> out;
    for (size_t t = 0; t + 2 < m.triangles.size(); t += 3) {
        std::array<std::array<int64_t, 3>, 3> v{};
        for (int k = 0; k < 3; ++k)
            for (int a = 0; a < 3; ++a)
                v[k][a] = 2 * m.grid.origin[a] +
                          surfaceKeyCoord(m.keys[m.triangles[t + k]], a) * m.grid.step;
        std::sort(v.begin(), v.end());
        out.insert(
            {v[0][0], v[0][1], v[0][2], v[1][0], v[1][1], v[1][2], v[2][0], v[2][1], v[2][2]});
    }
    return out;
}

// Every edge in exactly two triangles: a closed surface, no cracks at the patch's seam.
bool closedSurface(const SurfaceMesh& m) {
    std::map<std::pair<uint32_t, uint32_t>, int> edges;
    for (size_t t = 0; t + 2 < m.triangles.size(); t += 3)
        for (int e = 0; e < 3; ++e) {
            const uint32_t a = m.triangles[t + e], b = m.triangles[t + (e + 1) % 3];
            ++edges[{std::min(a, b), std::max(a, b)}];
        }
    return std::all_of(edges.begin(), edges.end(), [](const auto& e) { return e.second == 2; });
}

// Sets the voxels within `radius` voxels of `centre` (index space) to `value`; the changed box.
IndexBox paintBall(Volume& v, const std::array<double, 3>& centre, double radius, uint8_t value) {
    const Geometry g = v.geometry();
    uint8_t* p = v.data<uint8_t>();
    IndexBox box;
    box.lo = {INT64_MAX, INT64_MAX, INT64_MAX};
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const double d = std::hypot(i - centre[0], j - centre[1], k - centre[2]);
                uint8_t& x = p[(k * g.size[1] + j) * g.size[0] + i];
                if (d > radius || x == value) continue;
                x = value;
                const std::array<int64_t, 3> at{i, j, k};
                for (int a = 0; a < 3; ++a) {
                    box.lo[a] = std::min(box.lo[a], at[a]);
                    box.hi[a] = std::max(box.hi[a], at[a]);
                }
            }
    return box;
}

// An edit of a large label re-meshes only around it (issue 18: its 3D surface within 300 ms
// even when the label is a lung): the patched surface is exactly what marching cubes of the
// whole edited mask gives, closed at the seam, and smoothed like a full rebuild there.
TEST(SurfaceMesh, PatchedSurfaceEqualsAFullRebuildAndStaysClosed) {
    for (const int64_t step : {1, 2}) {
        SCOPED_TRACE("grid step " + std::to_string(step));
        const Geometry g = makeGeometry({100, 100, 100}, {0.5, 0.5, 0.5});
        Volume labels = makeVolume<uint8_t>(g, [&](const Vec3& p) {
            return testing::distance(p, g.indexToPhysical({50, 50, 50})) < 24 ? 1.0 : 0.0;
        });
        SurfaceOptions options;
        options.max_voxels = step == 1 ? options.max_voxels : 200000;
        auto before = buildLabelSurfaces(labels, {}, options);
        ASSERT_TRUE(before.isOk()) << before.status().toString();
        ASSERT_EQ(before->size(), 1u);
        SurfaceMesh mesh = (*before)[0];
        ASSERT_EQ(mesh.grid.step, step);
        ASSERT_TRUE(closedSurface(mesh));
        // Grow a bump on the ball's side and dig a hole into it (the box stays the same).
        const IndexBox grown = paintBall(labels, {50 + 34, 50 + 34, 50}, 5, 1);
        const IndexBox dug = paintBall(labels, {50 - 30, 50 - 30, 50 + 20}, 5, 0);
        // Both at once, then the bump again alone (patching a patched surface), then two
        // overlapping boxes (a cube in both is re-meshed once).
        IndexBox shifted = grown;
        for (int a = 0; a < 3; ++a) {
            shifted.lo[a] += 3;
            shifted.hi[a] += 3;
        }
        for (const std::vector<IndexBox>& changed :
             {std::vector<IndexBox>{grown, dug}, std::vector<IndexBox>{grown},
              std::vector<IndexBox>{grown, shifted}}) {
            auto patched = patchLabelSurface(labels, changed, mesh, options);
            ASSERT_TRUE(patched.isOk()) << patched.status().toString();
            ASSERT_TRUE(*patched) << "patch refused";
        }
        auto rebuilt = buildLabelSurfaces(labels, {}, options);
        ASSERT_TRUE(rebuilt.isOk());
        ASSERT_EQ(rebuilt->size(), 1u);
        const SurfaceMesh& full = (*rebuilt)[0];
        ASSERT_EQ(full.grid.origin, mesh.grid.origin);
        EXPECT_EQ(rawTriangles(mesh), rawTriangles(full));
        EXPECT_NE(rawTriangles(mesh), rawTriangles((*before)[0]));
        EXPECT_TRUE(closedSurface(mesh));
        // Normals as computed afresh for the patched mesh (kept ones included).
        const std::vector<float> normals = vertexNormals(mesh.positions, mesh.triangles);
        ASSERT_EQ(mesh.normals.size(), normals.size());
        for (size_t i = 0; i < normals.size(); ++i) ASSERT_NEAR(mesh.normals[i], normals[i], 1e-5);
        // Smoothed positions: vertex by vertex (matched by key) as the full rebuild's, within a
        // small fraction of a voxel (smoothing near the seam saw the old surface).
        std::map<uint64_t, size_t> full_vertex;
        for (size_t v = 0; v < full.keys.size(); ++v) full_vertex[full.keys[v]] = v;
        double worst = 0;
        for (size_t v = 0; v < mesh.keys.size(); ++v) {
            const size_t w = full_vertex.at(mesh.keys[v]);
            worst = std::max(
                worst,
                testing::distance(
                    {mesh.positions[v * 3], mesh.positions[v * 3 + 1], mesh.positions[v * 3 + 2]},
                    {full.positions[w * 3], full.positions[w * 3 + 1], full.positions[w * 3 + 2]}));
        }
        EXPECT_LT(worst, 0.1 * step) << "mm";
        std::printf("step %lld: %zu triangles, worst vertex offset from a full rebuild %.4f mm\n",
                    static_cast<long long>(step), mesh.triangleCount(), worst);
    }
}

TEST(SurfaceMesh, PatchIsRefusedWhereItWouldCoverMostOfTheLabel) {
    const Geometry g = makeGeometry({40, 40, 40}, {1, 1, 1});
    Volume labels = twoShapes(g, {20, 20, 20});
    auto meshes = buildLabelSurfaces(labels, {});
    ASSERT_TRUE(meshes.isOk());
    SurfaceMesh ball = (*meshes)[0];
    const SurfaceMesh unchanged = ball;
    const IndexBox changed = paintBall(labels, {20, 12, 20}, 3, 1);
    auto patched = patchLabelSurface(labels, {changed}, ball);
    ASSERT_TRUE(patched.isOk());
    EXPECT_FALSE(*patched);  // the 16^3 ball: re-meshed whole instead
    EXPECT_EQ(ball.triangles, unchanged.triangles);
    SurfaceMesh decimated = decimateMesh(unchanged, 2.0);
    auto no_keys = patchLabelSurface(labels, {changed}, decimated);
    ASSERT_TRUE(no_keys.isOk());
    EXPECT_FALSE(*no_keys);
}

TEST(ViewerState, LabelMapStoredInAnotherOrientationIsPermutedOntoTheImage) {
    const Geometry g = makeGeometry({12, 10, 8}, {0.9, 0.9, 2.0}, {-5, 7, 3});
    ViewerState state;
    pipeline::StudyInput study;
    study.volume = Volume::allocate<int16_t>(g);
    state.setStudy(study, "synthetic");
    const Volume labels = twoShapes(g, g.indexToPhysical({4, 5, 4}));
    auto las = pipeline::reorient(labels, "LAS");
    ASSERT_TRUE(las.isOk());
    ASSERT_NE(las->geometry().orientationCode(), g.orientationCode());
    ASSERT_TRUE(state.setLabelMap(*las, {}).isOk());
    int64_t differ = 0;
    for (int64_t k = 0; k < 8; ++k)
        for (int64_t j = 0; j < 10; ++j)
            for (int64_t i = 0; i < 12; ++i)
                differ += state.labelValue({i, j, k}) != testing::valueAt<uint8_t>(labels, i, j, k);
    EXPECT_EQ(differ, 0);
}

void showEmptyStudy(ViewerState& state, const Geometry& g) {
    pipeline::StudyInput study;
    study.volume = Volume::allocate<int16_t>(g);
    state.setStudy(study, "synthetic");
}

bool showView(SurfaceView& view) {
    view.resize(300, 300);
    view.show();
    return QTest::qWaitForWindowExposed(&view);
}

TEST(SurfaceView, DrawsLabelSurfacesWithOpenGl) {
    QString why;
    if (!openGlAvailable(&why))
        GTEST_SKIP() << why.toStdString() << " (run test_ui_gl under xvfb-run)";
    const Geometry g = makeGeometry({40, 40, 40}, {1, 1, 1});
    ViewerState state;
    showEmptyStudy(state, g);
    SurfaceView view(&state);
    ASSERT_TRUE(showView(view));
    QSignalSpy ready(&view, &SurfaceView::meshesReady);
    ASSERT_TRUE(state.setLabelMap(twoShapes(g, {20, 20, 20}), {{1, "ball", {255, 0, 0}}}).isOk());
    ASSERT_TRUE(QTest::qWaitFor([&] { return ready.count() > 0; }, 30000));
    EXPECT_EQ(ready.front()[0].toInt(), 2);
    // The ball is at the centre of the view: a lit red pixel there; the corner is background.
    const QImage frame = view.renderFrame();
    const QRgb centre = frame.pixel(frame.width() / 2, frame.height() / 2);
    EXPECT_GT(qRed(centre), 100);
    EXPECT_LT(qGreen(centre), qRed(centre) / 2);
    const QRgb corner = frame.pixel(2, frame.height() - 3);
    EXPECT_LT(qRed(corner), 40);
    // Dragging draws the decimated meshes until the button is released.
    ASSERT_FALSE(view.interactionMeshes().empty());
    const QPoint c = view.rect().center();
    QTest::mousePress(&view, Qt::LeftButton, Qt::NoModifier, c);
    EXPECT_TRUE(view.interacting());
    QTest::mouseMove(&view, c + QPoint(5, 0));
    QTest::mouseRelease(&view, Qt::LeftButton, Qt::NoModifier, c + QPoint(5, 0));
    EXPECT_FALSE(view.interacting());
    // Hiding the label leaves only the background at the centre.
    state.setAllLabelsVisible(false);
    const QRgb hidden = view.renderFrame().pixel(frame.width() / 2, frame.height() / 2);
    EXPECT_LT(qRed(hidden), 40);
}

// Editing (issue 18): an edit re-meshes only the labels it changed (the others keep their
// meshes), and the label opacity reaches the 3D view (see-through below 50 %).
TEST(SurfaceView, AnEditReMeshesOnlyItsLabelAndOpacityApplies) {
    QString why;
    if (!openGlAvailable(&why))
        GTEST_SKIP() << why.toStdString() << " (run test_ui_gl under xvfb-run)";
    const Geometry g = makeGeometry({40, 40, 40}, {1, 1, 1});
    ViewerState state;
    showEmptyStudy(state, g);
    SurfaceView view(&state);
    ASSERT_TRUE(showView(view));
    QSignalSpy ready(&view, &SurfaceView::meshesReady);
    const Vec3 centre = g.indexToPhysical({20, 20, 20});
    ASSERT_TRUE(state.setLabelMap(twoShapes(g, centre), {{1, "ball", {255, 0, 0}}}).isOk());
    ASSERT_TRUE(QTest::qWaitFor([&] { return ready.count() > 0; }, 30000));
    ASSERT_EQ(view.meshes().size(), 2u);
    const size_t box_triangles = view.meshes()[1].triangleCount();
    const size_t ball_triangles = view.meshes()[0].triangleCount();
    EditController edit(&state);
    edit::EditOp op;
    op.kind = edit::OpKind::kPaint;
    op.points = {{centre[0], centre[1] - 9, centre[2]}};
    op.radius_mm = 5;
    op.label = 1;
    ASSERT_TRUE(edit.apply(op).isOk());
    const int builds = view.meshBuilds();
    ASSERT_TRUE(
        QTest::qWaitFor([&] { return view.meshBuilds() > builds && !view.building(); }, 30000));
    EXPECT_EQ(view.lastBuildLabels(), std::vector<int>{1});
    ASSERT_EQ(view.meshes().size(), 2u);
    EXPECT_EQ(view.meshes()[0].label, 1);
    EXPECT_NE(view.meshes()[0].triangleCount(), ball_triangles);
    EXPECT_EQ(view.meshes()[1].triangleCount(), box_triangles);  // label 3 not re-meshed
    EXPECT_EQ(view.lastBuildPatched(), 0);                       // the 16 mm ball: meshed whole
    std::printf("edited label re-meshed in %.1f ms\n", view.lastBuildSeconds() * 1000);
    // Opacity: 50 % (the default) is opaque in 3D, 20 % lets the background through.
    const QImage opaque = view.renderFrame();
    const QRgb a = opaque.pixel(opaque.width() / 2, opaque.height() / 2);
    state.setLabelOpacity(0, 0.2);
    const QImage seen_through = view.renderFrame();
    const QRgb b = seen_through.pixel(opaque.width() / 2, opaque.height() / 2);
    EXPECT_LT(qRed(b), qRed(a) * 0.8) << qRed(a) << " -> " << qRed(b);
    EXPECT_GT(qRed(b), 20);
}

// Painting a small label into a large one (a lesion in the lung): both surfaces change in one
// build, the large one patched around the paint, and the result is the surface a rebuild of
// the edited map gives (before smoothing), closed.
TEST(SurfaceView, PaintingIntoALargeLabelPatchesItsSurface) {
    QString why;
    if (!openGlAvailable(&why))
        GTEST_SKIP() << why.toStdString() << " (run test_ui_gl under xvfb-run)";
    const Geometry g = makeGeometry({100, 100, 100}, {0.5, 0.5, 0.5});
    ViewerState state;
    showEmptyStudy(state, g);
    SurfaceView view(&state);
    ASSERT_TRUE(showView(view));
    QSignalSpy ready(&view, &SurfaceView::meshesReady);
    const Vec3 centre = g.indexToPhysical({50, 50, 50});
    ASSERT_TRUE(state
                    .setLabelMap(makeVolume<uint8_t>(g,
                                                     [&](const Vec3& p) {
                                                         return testing::distance(p, centre) < 24
                                                                    ? 1.0
                                                                    : 0.0;
                                                     }),
                                 {{1, "lung", {0, 200, 0}}, {2, "lesion", {255, 0, 0}}})
                    .isOk());
    ASSERT_TRUE(QTest::qWaitFor([&] { return ready.count() > 0 && !view.building(); }, 30000));
    ASSERT_EQ(view.meshes().size(), 1u);
    const size_t lung_triangles = view.meshes()[0].triangleCount();
    EditController edit(&state);
    edit::EditOp op;
    op.kind = edit::OpKind::kPaint;
    op.shape = edit::Shape::kSphere;
    op.points = {{centre[0] + 16, centre[1], centre[2]}};  // across the lung's surface
    op.radius_mm = 3;
    op.label = 2;
    const int builds = view.meshBuilds();
    ASSERT_TRUE(edit.apply(op).isOk());
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return view.meshBuilds() > builds && !view.building() && !view.editsPending(); },
        30000));
    EXPECT_EQ(view.lastBuildLabels(), (std::vector<int>{1, 2}));
    EXPECT_EQ(view.lastBuildPatched(), 1);  // the lung; the new lesion is meshed whole
    ASSERT_EQ(view.meshes().size(), 2u);
    const SurfaceMesh& lung = view.meshes()[0];
    EXPECT_NE(lung.triangleCount(), lung_triangles);
    EXPECT_TRUE(closedSurface(lung));
    auto rebuilt = buildLabelSurfaces(state.labelMap(), {});
    ASSERT_TRUE(rebuilt.isOk());
    ASSERT_EQ(rebuilt->size(), 2u);
    EXPECT_EQ(rawTriangles(lung), rawTriangles((*rebuilt)[0]));
    EXPECT_EQ(rawTriangles(view.meshes()[1]), rawTriangles((*rebuilt)[1]));
    std::printf("lung patched and lesion meshed in %.1f ms\n", view.lastBuildSeconds() * 1000);
    // The meshes drawn while rotating follow once the view is idle.
    EXPECT_TRUE(QTest::qWaitFor(
        [&] {
            const auto& coarse = view.interactionMeshes();
            return std::any_of(coarse.begin(), coarse.end(),
                               [](const SurfaceMesh& m) { return m.label == 2; });
        },
        10000));
    EXPECT_FALSE(view.renderFrame().isNull());
}

}  // namespace
}  // namespace voxseg::ui
