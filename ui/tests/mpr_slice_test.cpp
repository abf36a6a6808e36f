// Slice frames, extraction, window/level and label overlay as plain functions (no widgets).
#include "ui/mpr_slice.h"

#include "tests/pipeline/test_volumes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace voxseg::ui {
namespace {

using testing::makeGeometry;
using testing::makeVolume;

Mat3 rotationZ(double a) {
    return {std::cos(a), -std::sin(a), 0, std::sin(a), std::cos(a), 0, 0, 0, 1};
}
Mat3 multiply3(const Mat3& a, const Mat3& b) {
    Mat3 r{};
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 3; ++k) r[i * 3 + j] += a[i * 3 + k] * b[k * 3 + j];
    return r;
}

Vec3 physical(const Geometry& g, const std::array<int64_t, 3>& v) {
    return g.indexToPhysical(
        {static_cast<double>(v[0]), static_cast<double>(v[1]), static_cast<double>(v[2])});
}

std::string letters(const SliceFrame& f) {
    return {f.letters[0], f.letters[1], f.letters[2], f.letters[3]};
}

TEST(SliceFrame, AxialStackShowsRadiologicalViews) {
    const Geometry g = makeGeometry({10, 8, 6}, {0.7, 0.8, 2.0});
    const SliceFrame ax = makeSliceFrame(g, ViewAxis::kAxial);
    EXPECT_EQ(ax.axis_x, 0);
    EXPECT_EQ(ax.axis_y, 1);
    EXPECT_EQ(ax.axis_n, 2);
    EXPECT_FALSE(ax.flip_x);
    EXPECT_FALSE(ax.flip_y);
    EXPECT_EQ(letters(ax), "RLAP");
    const SliceFrame co = makeSliceFrame(g, ViewAxis::kCoronal);
    EXPECT_EQ(co.axis_y, 2);
    EXPECT_TRUE(co.flip_y);
    EXPECT_EQ(letters(co), "RLSI");
    EXPECT_EQ(co.width, 10);
    EXPECT_EQ(co.height, 6);
    EXPECT_DOUBLE_EQ(co.spacing_y, 2.0);
    const SliceFrame sa = makeSliceFrame(g, ViewAxis::kSagittal);
    EXPECT_EQ(sa.axis_x, 1);
    EXPECT_EQ(sa.axis_n, 0);
    EXPECT_EQ(letters(sa), "APSI");
}

// Whatever the stored orientation (RAS, sagittal acquisition, oblique), moving right/down on the
// screen moves towards the patient direction the view promises, and screen() inverts voxel().
TEST(SliceFrame, ScreenDirectionsFollowThePatientForAnyOrientation) {
    const Mat3 ras = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    const Mat3 sagittal = {0, 0, 1, 1, 0, 0, 0, -1, 0};  // i -> P, j -> I, k -> L
    const Mat3 oblique = multiply3(rotationZ(0.3), sagittal);
    struct Want {
        ViewAxis view;
        int right_axis, right_sign, down_axis, down_sign;
        const char* letters;
    };
    const Want wants[] = {{ViewAxis::kAxial, 0, +1, 1, +1, "RLAP"},
                          {ViewAxis::kCoronal, 0, +1, 2, -1, "RLSI"},
                          {ViewAxis::kSagittal, 1, +1, 2, -1, "APSI"}};
    for (const Mat3& dir : {Mat3{1, 0, 0, 0, 1, 0, 0, 0, 1}, ras, sagittal, oblique}) {
        const Geometry g = makeGeometry({9, 7, 5}, {1.0, 1.5, 2.0}, {3, -4, 5}, dir);
        for (const Want& w : wants) {
            const SliceFrame f = makeSliceFrame(g, w.view);
            SCOPED_TRACE(std::string(viewAxisName(w.view)) + " direction " + g.orientationCode());
            EXPECT_EQ(letters(f), w.letters);
            const int64_t s = f.depth / 2;
            for (int64_t r = 0; r + 1 < f.height; ++r)
                for (int64_t c = 0; c + 1 < f.width; ++c) {
                    const Vec3 p = physical(g, f.voxel(c, r, s));
                    const Vec3 right = physical(g, f.voxel(c + 1, r, s));
                    const Vec3 down = physical(g, f.voxel(c, r + 1, s));
                    ASSERT_GT((right[w.right_axis] - p[w.right_axis]) * w.right_sign, 0);
                    ASSERT_GT((down[w.down_axis] - p[w.down_axis]) * w.down_sign, 0);
                    const auto back = f.screen(f.voxel(c, r, s));
                    ASSERT_EQ(back, (std::array<int64_t, 3>{c, r, s}));
                }
        }
    }
}

// The same physical object stored LPS and RAS gives identical axial pixels.
TEST(ExtractSlice, StoredOrientationDoesNotChangeWhatIsShown) {
    auto f = [](const Vec3& p) { return 3 * p[0] - 7 * p[1] + 11 * p[2]; };
    const Geometry lps = makeGeometry({6, 5, 4}, {1, 1, 1}, {0, 0, 0});
    const Geometry ras =
        makeGeometry({6, 5, 4}, {1, 1, 1}, {5, 4, 0}, {-1, 0, 0, 0, -1, 0, 0, 0, 1});
    const Volume a = makeVolume<float>(lps, f), b = makeVolume<int16_t>(ras, f);
    for (auto view : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal}) {
        const SliceFrame fa = makeSliceFrame(lps, view), fb = makeSliceFrame(ras, view);
        for (int64_t s = 0; s < fa.depth; ++s) {
            // Same physical plane: the RAS grid's slice index may run the other way.
            const auto va = fa.voxel(0, 0, s);
            const Vec3 p = physical(lps, va);
            const Vec3 idx = ras.physicalToIndex(p);
            const int64_t sb = std::llround(idx[fb.axis_n]);
            EXPECT_EQ(extractSlice(a, fa, s), extractSlice(b, fb, sb)) << viewAxisName(view);
        }
    }
}

TEST(Window, GreyRampAndPresets) {
    const WindowLevel w{400, 40};
    EXPECT_EQ(windowGrey(-160, w), 0);
    EXPECT_EQ(windowGrey(-1000, w), 0);
    EXPECT_EQ(windowGrey(240, w), 255);
    EXPECT_EQ(windowGrey(40, w), 128);
    EXPECT_EQ(windowGrey(std::nan(""), w), 0);
    ASSERT_EQ(ctWindowPresets().size(), 4u);
    EXPECT_STREQ(ctWindowPresets()[1].name, "CT lung");
    EXPECT_DOUBLE_EQ(ctWindowPresets()[1].window.level, -600);
}

TEST(Window, AutoWindowFromPercentilesAndCtDefault) {
    const Geometry g = makeGeometry({100, 10, 10}, {1, 1, 1});
    Volume mr = Volume::allocate<uint16_t>(g, {.modality = "MR"});
    for (int64_t i = 0; i < g.voxelCount(); ++i)
        mr.data<uint16_t>()[i] = static_cast<uint16_t>(i % 1000);
    const WindowLevel w = autoWindow(mr);
    const double tolerance = 2.0;  // percentile of a discrete sample
    EXPECT_NEAR(w.level - w.width / 2, 5, tolerance);
    EXPECT_NEAR(w.level + w.width / 2, 994, tolerance);
    EXPECT_DOUBLE_EQ(defaultWindow(mr).width, w.width);
    Volume ct = Volume::allocate<int16_t>(g, {.modality = "CT"});
    EXPECT_DOUBLE_EQ(defaultWindow(ct).width, 400);
    // An image file without modality but with air at -1000 is windowed as CT.
    Volume nifti = Volume::allocate<int16_t>(g);
    for (int64_t i = 0; i < g.voxelCount(); ++i) nifti.data<int16_t>()[i] = i % 2 ? -1000 : 50;
    EXPECT_DOUBLE_EQ(defaultWindow(nifti).level, 40);
}

TEST(RenderSlice, LookupTableMatchesTheRampForEveryPixelType) {
    const Geometry g = makeGeometry({17, 13, 3}, {1, 1, 1});
    auto f = [](const Vec3& p) { return p[0] * 37 - p[1] * 11 - 200 + p[2]; };
    const WindowLevel w{300, -20};
    for (const Volume& v :
         {makeVolume<int16_t>(g, f), makeVolume<float>(g, f), makeVolume<int32_t>(g, f)}) {
        const SliceFrame fr = makeSliceFrame(g, ViewAxis::kCoronal);
        std::vector<uint32_t> argb(static_cast<size_t>(fr.width * fr.height));
        renderSlice(v, fr, 4, w, argb.data());
        const auto values = extractSlice(v, fr, 4);
        for (size_t i = 0; i < argb.size(); ++i) {
            const uint8_t grey = windowGrey(values[i], w);
            ASSERT_EQ(argb[i], 0xFF000000u | grey << 16 | grey << 8 | grey)
                << pixelTypeName(v.pixelType());
        }
    }
}

TEST(BlendLabels, FillOutlineAndHiddenLabels) {
    const Geometry g = makeGeometry({8, 8, 1}, {1, 1, 1});
    Volume labels = Volume::allocate<uint8_t>(g);
    for (int j = 2; j < 6; ++j)
        for (int i = 2; i < 6; ++i) labels.data<uint8_t>()[j * 8 + i] = 1;
    labels.data<uint8_t>()[0] = 2;
    const SliceFrame f = makeSliceFrame(g, ViewAxis::kAxial);
    const uint32_t grey = 0xFF404040u;
    LabelColors colors;
    colors.set(1, {255, 0, 0}, 0.5, true);
    colors.set(2, {0, 0, 255}, 1.0, false);
    std::vector<uint32_t> argb(64, grey);
    blendLabels(labels, f, 0, colors, OverlayMode::kFill, argb.data());
    // 0x40 * (1 - 128/255) + 255 * 128/255, rounded: opacity 0.5 is alpha 128.
    const uint32_t red = (0x40u * 127 + 255u * 128 + 127) / 255, rest = (0x40u * 127 + 127) / 255;
    EXPECT_EQ(argb[3 * 8 + 3], 0xFF000000u | red << 16 | rest << 8 | rest);
    EXPECT_EQ(argb[0], grey);          // label 2 hidden
    EXPECT_EQ(argb[1 * 8 + 1], grey);  // background
    std::fill(argb.begin(), argb.end(), grey);
    blendLabels(labels, f, 0, colors, OverlayMode::kOutline, argb.data());
    EXPECT_EQ(argb[2 * 8 + 3], 0xFFFF0000u);  // edge: opaque
    EXPECT_EQ(argb[3 * 8 + 3], grey);         // interior untouched
}

// Reading only the labels' bounding box gives exactly the pixels of reading the whole slice, for
// every view, flipped grids, both modes, and slices outside the box.
TEST(BlendLabels, BoundingBoxGivesTheSamePixels) {
    const Mat3 ras = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    for (const Mat3& dir : {Mat3{1, 0, 0, 0, 1, 0, 0, 0, 1}, ras}) {
        const Geometry g = makeGeometry({23, 19, 15}, {1, 1, 2}, {0, 0, 0}, dir);
        Volume labels = Volume::allocate<uint16_t>(g);
        IndexBox box{{5, 4, 3}, {16, 12, 9}};
        uint16_t* p = labels.data<uint16_t>();
        for (int64_t k = box.lo[2]; k <= box.hi[2]; ++k)
            for (int64_t j = box.lo[1]; j <= box.hi[1]; ++j)
                for (int64_t i = box.lo[0]; i <= box.hi[0]; ++i)
                    p[(k * 19 + j) * 23 + i] =
                        static_cast<uint16_t>(1 + (i * 7 + j * 3 + k) % 5 / 2);
        LabelColors colors;
        colors.set(1, {255, 0, 0}, 0.5, true);
        colors.set(2, {0, 255, 0}, 0.7, true);
        colors.set(3, {0, 0, 255}, 1.0, true);
        for (auto view : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal})
            for (auto mode : {OverlayMode::kFill, OverlayMode::kOutline}) {
                const SliceFrame f = makeSliceFrame(g, view);
                for (int64_t s = 0; s < f.depth; ++s) {
                    std::vector<uint32_t> whole(static_cast<size_t>(f.width * f.height),
                                                0xFF202020u);
                    std::vector<uint32_t> bounded = whole;
                    blendLabels(labels, f, s, colors, mode, whole.data());
                    blendLabels(labels, f, s, colors, mode, bounded.data(), &box);
                    ASSERT_EQ(whole, bounded) << viewAxisName(view) << " slice " << s;
                }
            }
    }
}

// The slab cache renders exactly renderSlice's pixels for every view and slice (forwards and
// backwards, a last block shorter than kSlices, rows in full and partial copy tiles), and builds
// one block per kSlices slices of the strided view only, the next one in the background.
TEST(SlabCache, SamePixelsAsReadingTheVolumeOneBlockPerSlab) {
    const Mat3 ras = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    for (const Mat3& dir : {Mat3{1, 0, 0, 0, 1, 0, 0, 0, 1}, ras}) {
        const int64_t n0 = SlabCache::kSlices + 7;
        // 70 rows: the block copy's tiles of 64 rows, one full and one partial.
        const Geometry g = makeGeometry({n0, 70, 11}, {1, 1, 2}, {0, 0, 0}, dir);
        const Volume image =
            makeVolume<int16_t>(g, [](const Vec3& p) { return p[0] * 37 - p[1] * 11 + p[2] * 5; });
        const WindowLevel window{300, 0};
        for (auto view : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal}) {
            const SliceFrame f = makeSliceFrame(g, view);
            SlabCache cache;
            std::vector<int64_t> order;
            for (int64_t s = 0; s < f.depth; ++s) order.push_back(s);
            for (int64_t s = f.depth - 1; s >= 0; --s) order.push_back(s);
            for (int64_t s : order) {
                std::vector<uint32_t> direct(static_cast<size_t>(f.width * f.height));
                std::vector<uint32_t> cached = direct;
                renderSlice(image, f, s, window, direct.data());
                cache.render(image, f, s, window, cached.data());
                ASSERT_EQ(direct, cached) << viewAxisName(view) << " slice " << s;
            }
            // Strided view: blocks [0, 32) and [32, 39) forwards, then [0, 32) again backwards;
            // only the first is built while the view waits, the others in the background.
            EXPECT_EQ(cache.blocksBuilt(), f.axis_n == 0 ? 1 : 0) << viewAxisName(view);
            EXPECT_EQ(cache.blocksPrefetched(), f.axis_n == 0 ? 2 : 0) << viewAxisName(view);
        }
    }
}

// A block built in the background for one volume is never shown for another: after scrolling
// volume A up to a block boundary (its next block on its way), volume B's slices past the
// boundary are B's.
TEST(SlabCache, BackgroundBlockOfAnotherVolumeIsNotUsed) {
    const Geometry g = makeGeometry({SlabCache::kSlices * 2, 20, 6}, {1, 1, 1}, {0, 0, 0},
                                    Mat3{1, 0, 0, 0, 1, 0, 0, 0, 1});
    const Volume a = makeVolume<int16_t>(g, [](const Vec3& p) { return p[0] * 3 + p[1]; });
    const Volume b = makeVolume<int16_t>(g, [](const Vec3& p) { return 500 - p[0] * 2 - p[2]; });
    const WindowLevel window{600, 200};
    const SliceFrame f = makeSliceFrame(g, ViewAxis::kSagittal);
    ASSERT_EQ(f.axis_n, 0);
    SlabCache cache;
    std::vector<uint32_t> direct(static_cast<size_t>(f.width * f.height)), cached = direct;
    for (int64_t s = SlabCache::kSlices - 3; s < SlabCache::kSlices; ++s)
        cache.render(a, f, s, window, cached.data());
    for (int64_t s = SlabCache::kSlices; s < SlabCache::kSlices + 3; ++s) {
        renderSlice(b, f, s, window, direct.data());
        cache.render(b, f, s, window, cached.data());
        ASSERT_EQ(direct, cached) << "slice " << s;
    }
    EXPECT_EQ(cache.blocksPrefetched(), 0);
}

// Drawing from the runs gives exactly the pixels of reading the volume: stored axial (LPS, RAS)
// and sagittal stacks (runs then serve another view), random labels with runs touching the
// edges, both modes, with and without the bounding box. Fails if the runs serve no view.
TEST(BlendLabels, RunsGiveTheSamePixels) {
    const Mat3 ras = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    // Index axes (i, j, k) along (P, S, L): a sagittal stack.
    const Mat3 sagittal_stack = {0, 0, 1, 1, 0, 0, 0, 1, 0};
    std::mt19937 rng(7);
    for (const Mat3& dir : {Mat3{1, 0, 0, 0, 1, 0, 0, 0, 1}, ras, sagittal_stack}) {
        const Geometry g = makeGeometry({17, 13, 11}, {1, 1, 2}, {0, 0, 0}, dir);
        Volume labels = Volume::allocate<int16_t>(g);
        int16_t* p = labels.data<int16_t>();
        // Blobs: runs of random length and value, many touching the grid's edges.
        for (int64_t n = 0; n < g.voxelCount();) {
            const int64_t len = 1 + static_cast<int64_t>(rng() % 9);
            const int16_t v = static_cast<int16_t>(rng() % 3 == 0 ? 0 : rng() % 4);
            for (int64_t e = 0; e < len && n < g.voxelCount(); ++e) p[n++] = v;
        }
        const LabelRuns runs = buildLabelRuns(labels, labelRunAxis(g));
        ASSERT_FALSE(runs.empty());
        IndexBox box{{0, 0, 0}, {16, 12, 10}};
        LabelColors colors;
        colors.set(1, {255, 0, 0}, 0.5, true);
        colors.set(2, {0, 255, 0}, 0.7, true);
        colors.set(3, {0, 0, 255}, 1.0, true);
        int served = 0;
        for (auto view : {ViewAxis::kAxial, ViewAxis::kCoronal, ViewAxis::kSagittal}) {
            const SliceFrame f = makeSliceFrame(g, view);
            served += runs.serves(f) ? 1 : 0;
            for (auto mode : {OverlayMode::kFill, OverlayMode::kOutline})
                for (int64_t s = 0; s < f.depth; ++s) {
                    std::vector<uint32_t> direct(static_cast<size_t>(f.width * f.height),
                                                 0xFF202020u);
                    std::vector<uint32_t> from_runs = direct, boxed = direct;
                    blendLabels(labels, f, s, colors, mode, direct.data());
                    blendLabels(labels, f, s, colors, mode, from_runs.data(), nullptr, &runs);
                    blendLabels(labels, f, s, colors, mode, boxed.data(), &box, &runs);
                    ASSERT_EQ(direct, from_runs) << viewAxisName(view) << " slice " << s;
                    ASSERT_EQ(direct, boxed) << viewAxisName(view) << " slice " << s;
                }
        }
        EXPECT_EQ(served, 1);
    }
}

}  // namespace
}  // namespace voxseg::ui
