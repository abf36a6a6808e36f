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

#include <cmath>

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

}  // namespace
}  // namespace voxseg::ui
