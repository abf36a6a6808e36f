// Threshold, flood fill, fill between slices, islands, smoothing, margin and logical ops, each
// against expectations computed here from its definition.
#include "edit/label_editor.h"
#include "tests/edit/edit_test_grids.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace voxseg::edit {
namespace {

using testing::distance;
using testing::forEachVoxel;
using testing::gridCases;
using testing::labelAt;

LabelEditor makeEditor(const Volume& image, const Volume& labels) {
    auto e = LabelEditor::create(image, labels);
    EXPECT_TRUE(e.isOk()) << e.status().toString();
    return std::move(e).value();
}

void set(Volume& labels, int64_t idx, int value) { labels.data<uint8_t>()[idx] = uint8_t(value); }

TEST(Threshold, FillsTheVoxelsInRangeIn3DOrInOneSlice) {
    for (const auto& g : gridCases()) {
        SCOPED_TRACE(g.name);
        const Geometry& geo = g.geometry;
        Volume image = testing::makeImage(geo);
        const int16_t* hu = image.data<int16_t>();
        Volume labels = testing::makeLabels(geo);
        auto editor = makeEditor(image, labels);
        EditOp op;
        op.kind = OpKind::kThreshold;
        op.label = 5;
        op.min = 100;
        op.max = 180;
        ASSERT_TRUE(editor.apply(op).isOk());
        int64_t in = 0, bad = 0;
        forEachVoxel(geo, [&](int64_t, int64_t, int64_t, int64_t idx, Vec3) {
            const bool want = hu[idx] >= 100 && hu[idx] <= 180;
            in += want;
            bad += labelAt(editor.labelMap(), idx) != (want ? 5 : 0);
        });
        EXPECT_EQ(bad, 0);
        EXPECT_GT(in, 100);

        // In the sagittal plane through a point: only that grid slice.
        auto slice_editor = makeEditor(image, labels);
        op.in_slice = true;
        op.plane = Plane::kSagittal;
        const Vec3 c = testing::gridCentre(geo);
        op.points = {c};
        ASSERT_TRUE(slice_editor.apply(op).isOk());
        int axis = 0;
        for (int a = 1; a < 3; ++a)
            if (std::abs(geo.direction[a]) > std::abs(geo.direction[axis])) axis = a;
        const double s = std::round(geo.physicalToIndex(c)[axis]);
        bad = 0;
        in = 0;
        forEachVoxel(geo, [&](int64_t i, int64_t j, int64_t k, int64_t idx, Vec3) {
            const int64_t ijk[3] = {i, j, k};
            const bool want = ijk[axis] == s && hu[idx] >= 100 && hu[idx] <= 180;
            in += want;
            bad += labelAt(slice_editor.labelMap(), idx) != (want ? 5 : 0);
        });
        EXPECT_EQ(bad, 0);
        EXPECT_GT(in, 3);
    }
}

TEST(FloodFill, GrowsFromTheSeedWithinTheRangeWith6Or26Neighbours) {
    Geometry g;
    g.size = {20, 20, 20};
    g.spacing = {1.0, 1.2, 1.5};
    g.origin = {5, 6, 7};
    Volume image = Volume::allocate<int16_t>(g);
    int16_t* hu = image.data<int16_t>();
    // Two bright cubes touching only along an edge: one region with 26 neighbours, two with 6.
    forEachVoxel(g, [&](int64_t i, int64_t j, int64_t k, int64_t idx, Vec3) {
        if (i >= 2 && i < 8 && j >= 2 && j < 8 && k >= 2 && k < 8) hu[idx] = 100;
        if (i >= 8 && i < 14 && j >= 8 && j < 14 && k >= 2 && k < 8) hu[idx] = 120;
    });
    Volume labels = Volume::allocate<uint8_t>(g);
    EditOp op;
    op.kind = OpKind::kFloodFill;
    op.label = 1;
    op.points = {g.indexToPhysical({3.2, 4.1, 5.3})};
    op.min = 90;
    op.max = 130;
    for (int conn : {6, 26}) {
        SCOPED_TRACE(conn);
        op.connectivity = conn;
        auto editor = makeEditor(image, labels);
        auto r = editor.apply(op);
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        EXPECT_EQ(r->voxels_changed, conn == 6 ? 216 : 432);
        int64_t bad = 0;
        forEachVoxel(g, [&](int64_t i, int64_t, int64_t, int64_t idx, Vec3) {
            const bool want = hu[idx] > 0 && (conn == 26 || i < 8);
            bad += labelAt(editor.labelMap(), idx) != (want ? 1 : 0);
        });
        EXPECT_EQ(bad, 0);
    }
    // In an axial slice: one 6x6 square.
    op.connectivity = 26;
    op.in_slice = true;
    op.plane = Plane::kAxial;
    auto editor = makeEditor(image, labels);
    auto r = editor.apply(op);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->voxels_changed, 36 + 36);  // the diagonal square joins through its corner
    // A seed outside the range changes nothing; a seed off the image is an error.
    op.points = {g.indexToPhysical({15, 15, 15})};
    EXPECT_EQ(makeEditor(image, labels).apply(op)->voxels_changed, 0);
    op.points = {{-100, 0, 0}};
    auto off = makeEditor(image, labels).apply(op);
    ASSERT_FALSE(off.isOk());
    EXPECT_NE(off.status().message().find("seed_mm"), std::string::npos);
}

TEST(LevelTrace, FillsTheOutlineThroughTheSeedInItsSlice) {
    for (const auto& g : gridCases()) {
        SCOPED_TRACE(g.name);
        const Geometry& geo = g.geometry;
        Volume image = Volume::allocate<int16_t>(geo);
        const Vec3 c = testing::gridCentre(geo);
        // A bright shell 5..8 mm from c: in any slice near c, a ring around a dark hole.
        forEachVoxel(geo, [&](int64_t, int64_t, int64_t, int64_t idx, Vec3 p) {
            const double d = distance(p, c);
            image.data<int16_t>()[idx] = d >= 5 && d <= 8 ? 100 : 0;
        });
        Volume labels = testing::makeLabels(geo);
        auto editor = makeEditor(image, labels);
        EditOp op;
        op.kind = OpKind::kLevelTrace;
        op.label = 6;
        op.plane = Plane::kAxial;
        op.in_slice = true;
        // On the ring, in the axial slice through c: from c towards the patient's left.
        op.points = {{c[0] + 6.5, c[1], c[2]}};
        ASSERT_TRUE(editor.apply(op).isOk());
        int axis = 0;
        for (int a = 1; a < 3; ++a)
            if (std::abs(geo.direction[6 + a]) > std::abs(geo.direction[6 + axis])) axis = a;
        const double s = std::round(geo.physicalToIndex(op.points[0])[axis]);
        int64_t bad = 0, in = 0;
        forEachVoxel(geo, [&](int64_t i, int64_t j, int64_t k, int64_t idx, Vec3 p) {
            const int64_t ijk[3] = {i, j, k};
            const bool want = ijk[axis] == s && distance(p, c) <= 8;
            in += want;
            bad += labelAt(editor.labelMap(), idx) != (want ? 6 : 0);
        });
        EXPECT_EQ(bad, 0);
        EXPECT_GT(in, 100);
    }
}

double dice(const Volume& a, const Volume& b, int label) {
    int64_t both = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < a.geometry().voxelCount(); ++i) {
        const bool x = labelAt(a, i) == label, y = labelAt(b, i) == label;
        both += x && y;
        na += x;
        nb += y;
    }
    return na + nb == 0 ? 1.0 : 2.0 * double(both) / double(na + nb);
}

TEST(FillBetweenSlices, SphereOnEveryFifthSliceInterpolatesToDice95) {
    for (const auto& g : gridCases()) {
        SCOPED_TRACE(g.name);
        Geometry geo = g.geometry;
        geo.size = {60, 60, 60};
        geo.spacing = {0.9, 0.8, 1.0};
        Volume image = testing::makeImage(geo);
        Volume truth = testing::makeLabels(geo);
        Volume drawn = testing::makeLabels(geo);
        const Vec3 c = geo.indexToPhysical({29.6, 30.3, 29.2});
        const double r = 17.5;
        // Slice axis of the axial plane: the index axis closest to S.
        int axis = 0;
        for (int a = 1; a < 3; ++a)
            if (std::abs(geo.direction[6 + a]) > std::abs(geo.direction[6 + axis])) axis = a;
        int key_slices = 0;
        std::set<int64_t> keys;
        forEachVoxel(geo, [&](int64_t i, int64_t j, int64_t k, int64_t idx, Vec3 p) {
            if (distance(p, c) > r) return;
            set(truth, idx, 7);
            const int64_t ijk[3] = {i, j, k};
            if (ijk[axis] % 5 == 0) {
                set(drawn, idx, 7);
                keys.insert(ijk[axis]);
            }
        });
        key_slices = int(keys.size());
        EXPECT_GE(key_slices, 5);
        auto editor = makeEditor(image, drawn);
        EditOp op;
        op.kind = OpKind::kFillBetweenSlices;
        op.label = 7;
        op.plane = Plane::kAxial;
        auto rep = editor.apply(op);
        ASSERT_TRUE(rep.isOk()) << rep.status().toString();
        const double before = dice(drawn, truth, 7), after = dice(editor.labelMap(), truth, 7);
        EXPECT_LT(before, 0.5);
        EXPECT_GE(after, 0.95) << "before " << before;
        RecordProperty("dice_" + g.name, std::to_string(after));
        // Drawn slices are kept as drawn.
        int64_t lost = 0;
        for (int64_t i = 0; i < geo.voxelCount(); ++i)
            lost += labelAt(drawn, i) == 7 && labelAt(editor.labelMap(), i) != 7;
        EXPECT_EQ(lost, 0);
    }
}

TEST(Islands, KeepLargestRemoveSmallAndSplit) {
    Geometry g;
    g.size = {30, 20, 10};
    g.spacing = {2.0, 2.0, 2.5};  // 10 uL per voxel
    Volume image = Volume::allocate<int16_t>(g);
    Volume labels = Volume::allocate<uint8_t>(g);
    // Three blobs of label 3: 4x4x4 = 64 voxels, 3x3x3 = 27, and a 2x2x1 = 4 voxel speck; a
    // label 9 elsewhere (split numbers new labels above it).
    auto box = [&](int x0, int y0, int z0, int n, int nz, int v) {
        for (int z = z0; z < z0 + nz; ++z)
            for (int y = y0; y < y0 + n; ++y)
                for (int x = x0; x < x0 + n; ++x) set(labels, x + 30 * (y + 20 * z), v);
    };
    box(1, 1, 1, 4, 4, 3);
    box(10, 10, 2, 3, 3, 3);
    box(20, 3, 5, 2, 1, 3);
    box(25, 15, 0, 2, 2, 9);
    auto count = [](const Volume& v, int label) {
        int64_t n = 0;
        for (int64_t i = 0; i < v.geometry().voxelCount(); ++i) n += labelAt(v, i) == label;
        return n;
    };
    EditOp op;
    op.kind = OpKind::kIslands;
    op.label = 3;
    op.connectivity = 26;
    {
        auto e = makeEditor(image, labels);
        op.island_mode = IslandMode::kKeepLargest;
        ASSERT_TRUE(e.apply(op).isOk());
        EXPECT_EQ(count(e.labelMap(), 3), 64);
        EXPECT_EQ(labelAt(e.labelMap(), 2 + 30 * (2 + 20 * 2)), 3);
    }
    {
        auto e = makeEditor(image, labels);
        op.island_mode = IslandMode::kRemoveSmall;
        op.min_ml = 0.1;  // 10 voxels
        ASSERT_TRUE(e.apply(op).isOk());
        EXPECT_EQ(count(e.labelMap(), 3), 64 + 27);
    }
    {
        auto e = makeEditor(image, labels);
        op.island_mode = IslandMode::kSplit;
        auto r = e.apply(op);
        ASSERT_TRUE(r.isOk());
        EXPECT_EQ(r->new_labels, (std::vector<int>{10, 11}));
        EXPECT_EQ(count(e.labelMap(), 3), 64);
        EXPECT_EQ(count(e.labelMap(), 10), 27);
        EXPECT_EQ(count(e.labelMap(), 11), 4);
        EXPECT_EQ(count(e.labelMap(), 9), 8);
    }
}

// Centres of the voxels of `v` that hold `label` (or, with `invert`, any other value) within
// `within_mm` of `near`.
std::vector<Vec3> centres(const Volume& v, int label, bool invert, const Vec3& near,
                          double within_mm) {
    std::vector<Vec3> out;
    forEachVoxel(v.geometry(), [&](int64_t, int64_t, int64_t, int64_t idx, Vec3 q) {
        if ((labelAt(v, idx) == label) != invert && distance(q, near) <= within_mm)
            out.push_back(q);
    });
    return out;
}
double nearest(const std::vector<Vec3>& points, const Vec3& p) {
    double best = 1e9;
    for (const Vec3& q : points) best = std::min(best, distance(p, q));
    return best;
}

TEST(Morphology, MarginGrowIsTheVoxelsWithinMarginOfTheLabel) {
    for (const auto& g : gridCases()) {
        SCOPED_TRACE(g.name);
        Geometry geo = g.geometry;
        geo.size = {24, 22, 20};
        Volume image = testing::makeImage(geo);
        Volume labels = testing::makeLabels(geo);
        set(labels, 10 + 24 * (11 + 22 * 9), 2);
        set(labels, 13 + 24 * (11 + 22 * 9), 2);
        set(labels, 5 + 24 * (5 + 22 * 5), 4);  // another label far away
        auto e = makeEditor(image, labels);
        EditOp op;
        op.kind = OpKind::kMargin;
        op.label = 2;
        op.margin_mm = 3.25;
        ASSERT_TRUE(e.apply(op).isOk());
        const Vec3 mid = geo.indexToPhysical({11.5, 11, 9});
        const std::vector<Vec3> seeds = centres(labels, 2, false, mid, 1e9);
        int64_t bad = 0, in = 0;
        forEachVoxel(geo, [&](int64_t, int64_t, int64_t, int64_t idx, Vec3 p) {
            if (labelAt(labels, idx) == 4) {
                bad += labelAt(e.labelMap(), idx) != 4;
                return;
            }
            const bool want = nearest(seeds, p) <= 3.25;
            in += want;
            bad += labelAt(e.labelMap(), idx) != (want ? 2 : 0);
        });
        EXPECT_EQ(bad, 0);
        EXPECT_GT(in, 100);

        // Shrinking by the same margin keeps the voxels farther than it from the background.
        Volume grown = cloneVolume(e.labelMap());
        op.margin_mm = -2.1;
        ASSERT_TRUE(e.apply(op).isOk());
        const std::vector<Vec3> background = centres(grown, 2, true, mid, 14.0);
        bad = 0;
        forEachVoxel(geo, [&](int64_t, int64_t, int64_t, int64_t idx, Vec3 p) {
            if (labelAt(grown, idx) != 2) return;
            bad += labelAt(e.labelMap(), idx) != (nearest(background, p) > 2.1 ? 2 : 0);
        });
        EXPECT_EQ(bad, 0);
    }
}

TEST(Morphology, OpeningRemovesASpurClosingFillsAGapMedianRemovesASpeck) {
    Geometry g;
    g.size = {40, 40, 20};
    Volume image = Volume::allocate<int16_t>(g);
    Volume labels = Volume::allocate<uint8_t>(g);
    auto at = [](int x, int y, int z) { return int64_t(x) + 40 * (y + 40 * int64_t(z)); };
    // A 12^3 cube with a one-voxel spur, and a one-voxel-wide slit cut through another cube.
    for (int z = 4; z < 16; ++z)
        for (int y = 4; y < 16; ++y)
            for (int x = 4; x < 16; ++x) set(labels, at(x, y, z), 1);
    for (int x = 16; x < 20; ++x) set(labels, at(x, 10, 10), 1);
    for (int z = 4; z < 16; ++z)
        for (int y = 22; y < 34; ++y)
            for (int x = 22; x < 34; ++x)
                if (x != 28) set(labels, at(x, y, z), 2);
    set(labels, at(36, 5, 5), 2);  // a speck
    EditOp op;
    op.label = 1;
    op.radius_mm = 1.5;
    {
        auto e = makeEditor(image, labels);
        op.kind = OpKind::kOpening;
        ASSERT_TRUE(e.apply(op).isOk());
        EXPECT_EQ(labelAt(e.labelMap(), at(18, 10, 10)), 0);
        EXPECT_EQ(labelAt(e.labelMap(), at(10, 10, 10)), 1);
    }
    op.label = 2;
    {
        auto e = makeEditor(image, labels);
        op.kind = OpKind::kClosing;
        ASSERT_TRUE(e.apply(op).isOk());
        EXPECT_EQ(labelAt(e.labelMap(), at(28, 28, 10)), 2);
        EXPECT_EQ(labelAt(e.labelMap(), at(21, 28, 10)), 0);  // nothing grows outside
    }
    {
        auto e = makeEditor(image, labels);
        op.kind = OpKind::kMedian;
        op.radius_mm = 1.0;
        ASSERT_TRUE(e.apply(op).isOk());
        EXPECT_EQ(labelAt(e.labelMap(), at(36, 5, 5)), 0);
        EXPECT_EQ(labelAt(e.labelMap(), at(28, 28, 10)), 2);  // the slit is filled
        EXPECT_EQ(labelAt(e.labelMap(), at(25, 25, 10)), 2);
    }
}

TEST(Logical, UnionCopyIntersectSubtractClear) {
    Geometry g;
    g.size = {8, 8, 8};
    Volume image = Volume::allocate<int16_t>(g);
    Volume labels = Volume::allocate<uint8_t>(g);
    for (int64_t i = 0; i < 512; ++i) set(labels, i, int(i % 3));
    auto run = [&](LogicalOp l) {
        auto e = makeEditor(image, labels);
        EditOp op;
        op.kind = OpKind::kLogical;
        op.logical = l;
        op.label = 1;
        op.other = 2;
        EXPECT_TRUE(e.apply(op).isOk());
        return cloneVolume(e.labelMap());
    };
    const Volume u = run(LogicalOp::kUnion), c = run(LogicalOp::kCopy),
                 n = run(LogicalOp::kIntersect), s = run(LogicalOp::kSubtract),
                 z = run(LogicalOp::kClear);
    for (int64_t i = 0; i < 512; ++i) {
        const int v = int(i % 3);
        EXPECT_EQ(labelAt(u, i), v == 0 ? 0 : 1);
        EXPECT_EQ(labelAt(c, i), v == 2 ? 1 : 0);
        EXPECT_EQ(labelAt(n, i), v == 2 ? 2 : 0);
        EXPECT_EQ(labelAt(s, i), v);
        EXPECT_EQ(labelAt(z, i), v == 2 ? 2 : 0);
    }
}

}  // namespace
}  // namespace voxseg::edit
