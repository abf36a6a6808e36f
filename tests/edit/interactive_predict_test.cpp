// edit/interactive/predict.h with a fake network (the prediction is the image thresholded at
// 0.5, so the right answer is known at every zoom): a window that sees the whole object is
// pasted as is; an object cut by the window's border makes AutoZoom grow the window by 1.5 until
// the border no longer changes (or the limit); a zoomed-out prediction is refined in patch-sized
// boxes that cover the change and only those boxes reach the target; undo hooks see every write
// before it happens; windows past the image are zero-padded and pasted clipped.
#include "edit/interactive/predict.h"
#include "edit/interactive/resample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

namespace voxseg::edit::interactive {
namespace {

InteractiveSpec spec(int64_t patch) {
    InteractiveSpec s;
    s.patch = {patch, patch, patch};
    s.image_channels = 1;
    s.interaction_channels = 7;
    s.prev_seg = 0;
    s.channel_pairs = {
        {"bbox2d", {1, 2}}, {"lasso", {1, 2}}, {"points", {3, 4}}, {"scribble", {5, 6}}};
    s.supported = {{"points", true}, {"bbox2d", true}, {"scribble", true}, {"lasso", true}};
    s.max_zoom = 4.0;
    s.zoom_growth = 1.5;
    return s;
}

// A state whose image is 1 inside `inside(z, y, x)` and 0 elsewhere.
template <typename F>
SessionState state(const Index3& shape, F inside) {
    SessionState st;
    st.shape = shape;
    const int64_t n = voxelCount(shape);
    st.image.assign(static_cast<size_t>(n), 0.0f);
    for (int64_t z = 0; z < shape[0]; ++z)
        for (int64_t y = 0; y < shape[1]; ++y)
            for (int64_t x = 0; x < shape[2]; ++x)
                if (inside(z, y, x)) st.image[(z * shape[1] + y) * shape[2] + x] = 1.0f;
    st.interactions.shape = shape;
    st.interactions.channels = 7;
    st.interactions.bits.assign(static_cast<size_t>(7 * n), 0);
    st.target.assign(static_cast<size_t>(n), 0);
    return st;
}

// The fake network: argmax = image channel > 0.5; counts its calls.
struct Threshold {
    int64_t patch_voxels;
    int* calls;
    Status operator()(const std::vector<float>& input, std::vector<uint8_t>& argmax) const {
        ++*calls;
        if (input.size() != static_cast<size_t>(8 * patch_voxels))
            return internalError("wrong input size");
        argmax.resize(static_cast<size_t>(patch_voxels));
        for (int64_t i = 0; i < patch_voxels; ++i) argmax[i] = input[i] > 0.5f;
        return Status::ok();
    }
};

struct Write {
    int channel;
    Box box;
};

bool same(const Box& a, const Box& b) { return a.lo == b.lo && a.hi == b.hi; }

TEST(InteractivePredict, WholeObjectInTheWindowIsPastedWithoutZoom) {
    const auto sp = spec(56);
    auto st = state({60, 64, 70}, [](int64_t z, int64_t y, int64_t x) {
        return z >= 25 && z < 35 && y >= 28 && y < 36 && x >= 30 && x < 41;
    });
    std::vector<Write> writes;
    st.before_write = [&](int c, const Box& b) { writes.push_back({c, b}); };
    int calls = 0;
    PredictionLog log;
    auto r = predict(st, sp, {30, 32, 35}, 1.0, true, false, Threshold{56 * 56 * 56, &calls}, &log);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(calls, 1);
    ASSERT_EQ(log.forwards.size(), 1u);
    EXPECT_EQ(log.forwards[0].zoom, 1.0);
    const Box window{{2, 4, 7}, {58, 60, 63}};  // [c - 28, c + 28)
    EXPECT_TRUE(same(log.forwards[0].scaled_box, window));
    EXPECT_TRUE(log.refinement_boxes.empty());
    ASSERT_TRUE(r->has_value());
    EXPECT_TRUE(same(**r, window));
    ASSERT_EQ(writes.size(), 2u);
    EXPECT_EQ(writes[0].channel, 0);
    EXPECT_EQ(writes[1].channel, -1);
    EXPECT_TRUE(same(writes[0].box, window) && same(writes[1].box, window));
    for (size_t i = 0; i < st.target.size(); ++i) {
        ASSERT_EQ(st.target[i], st.image[i] > 0.5f ? 1 : 0) << i;
        ASSERT_EQ(st.interactions.channel(0)[i], st.target[i] ? 0x3c00 : 0) << i;
    }
}

// A ball the zoom-1 window cuts: AutoZoom grows to 1.5, where the window holds the whole image
// and its faces no longer change; then refinement boxes are planned and run at full resolution.
TEST(InteractivePredict, AutoZoomGrowsUntilTheBorderSettlesThenRefines) {
    const auto sp = spec(64);
    const auto ball = [](int64_t z, int64_t y, int64_t x) {
        return (z - 40) * (z - 40) + (y - 40) * (y - 40) + (x - 40) * (x - 40) <= 34 * 34;
    };
    auto st = state({80, 80, 80}, ball);
    std::vector<Write> writes;
    st.before_write = [&](int c, const Box& b) { writes.push_back({c, b}); };
    int calls = 0;
    PredictionLog log;
    auto r = predict(st, sp, {40, 40, 40}, 1.0, true, false, Threshold{64 * 64 * 64, &calls}, &log);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_GE(log.forwards.size(), 3u);
    EXPECT_EQ(log.forwards[0].zoom, 1.0);
    EXPECT_EQ(log.forwards[1].zoom, 1.5);
    EXPECT_TRUE(same(log.forwards[1].scaled_box, Box{{-8, -8, -8}, {88, 88, 88}}));
    ASSERT_FALSE(log.refinement_boxes.empty());
    EXPECT_EQ(log.forwards.size(), 2 + log.refinement_boxes.size());
    EXPECT_EQ(calls, static_cast<int>(log.forwards.size()));
    Box hull = log.refinement_boxes[0];
    for (const Box& b : log.refinement_boxes) {
        EXPECT_EQ(boxSize(b), sp.patch);
        for (int d = 0; d < 3; ++d) {
            hull.lo[d] = std::min(hull.lo[d], b.lo[d]);
            hull.hi[d] = std::max(hull.hi[d], b.hi[d]);
        }
    }
    const Box clipped = *clipBox(hull, st.shape);
    ASSERT_TRUE(r->has_value());
    EXPECT_TRUE(same(**r, clipped));
    ASSERT_EQ(writes.size(), 2u);  // one pre-image of the hull per written channel
    EXPECT_TRUE(same(writes[0].box, clipped) && writes[0].channel == 0);
    EXPECT_TRUE(same(writes[1].box, clipped) && writes[1].channel == -1);
    // Inside the refined boxes the target is the full-resolution answer, elsewhere untouched.
    int64_t ball_voxels = 0, covered = 0;
    for (int64_t z = 0; z < 80; ++z)
        for (int64_t y = 0; y < 80; ++y)
            for (int64_t x = 0; x < 80; ++x) {
                const int64_t i = (z * 80 + y) * 80 + x;
                bool refined = false;
                for (const Box& b : log.refinement_boxes)
                    refined |= z >= b.lo[0] && z < b.hi[0] && y >= b.lo[1] && y < b.hi[1] &&
                               x >= b.lo[2] && x < b.hi[2];
                ASSERT_EQ(st.target[i], refined && ball(z, y, x) ? 1 : 0)
                    << z << " " << y << " " << x;
                ball_voxels += ball(z, y, x);
                covered += st.target[i];
            }
    EXPECT_GT(covered, ball_voxels * 99 / 100);
}

// A package's refinement margin (model.json interactive.refinement_margin): each box counts a
// larger inner part as covered, so the same change is covered by fewer boxes and still refined.
TEST(InteractivePredict, ASmallerRefinementMarginPlansFewerBoxes) {
    const auto ball = [](int64_t z, int64_t y, int64_t x) {
        return (z - 40) * (z - 40) + (y - 40) * (y - 40) + (x - 40) * (x - 40) <= 34 * 34;
    };
    std::vector<size_t> boxes;
    for (int64_t margin : {24, 8}) {
        auto sp = spec(64);
        sp.refinement_margin = {margin, margin, margin};
        auto st = state({80, 80, 80}, ball);
        int calls = 0;
        PredictionLog log;
        auto r =
            predict(st, sp, {40, 40, 40}, 1.0, true, false, Threshold{64 * 64 * 64, &calls}, &log);
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        ASSERT_FALSE(log.refinement_boxes.empty());
        boxes.push_back(log.refinement_boxes.size());
        int64_t ball_voxels = 0, covered = 0;
        for (int64_t i = 0; i < 80 * 80 * 80; ++i) {
            ball_voxels += ball(i / 6400, i / 80 % 80, i % 80);
            covered += st.target[i];
        }
        EXPECT_GT(covered, ball_voxels * 99 / 100) << "margin " << margin;
    }
    std::cout << "refinement boxes: margin 24 " << boxes[0] << ", margin 8 " << boxes[1] << "\n";
    EXPECT_LT(boxes[1] * 2, boxes[0]);
}

TEST(InteractivePredict, AutoZoomOffKeepsTheFirstWindow) {
    const auto sp = spec(64);
    auto st = state({80, 80, 80}, [](int64_t z, int64_t y, int64_t x) {
        return (z - 40) * (z - 40) + (y - 40) * (y - 40) + (x - 40) * (x - 40) <= 34 * 34;
    });
    int calls = 0;
    PredictionLog log;
    auto r =
        predict(st, sp, {40, 40, 40}, 1.0, false, false, Threshold{64 * 64 * 64, &calls}, &log);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(log.refinement_boxes.empty());
    EXPECT_TRUE(same(**r, Box{{8, 8, 8}, {72, 72, 72}}));
}

// The border test's thresholds: a face whose changed voxels are <= 100 does not zoom; > 100
// with a relative change > 20 % does.
TEST(InteractivePredict, BorderChangeNeedsMoreThan100Voxels) {
    const auto sp = spec(56);
    for (const int side : {10, 11}) {  // 100 and 121 voxels on the face x = 63
        auto st = state({64, 64, 90}, [&](int64_t z, int64_t y, int64_t x) {
            return z >= 28 && z < 28 + side && y >= 28 && y < 28 + side && x >= 40 && x < 75;
        });
        int calls = 0;
        PredictionLog log;
        auto r =
            predict(st, sp, {32, 32, 35}, 1.0, true, false, Threshold{56 * 56 * 56, &calls}, &log);
        ASSERT_TRUE(r.isOk());
        if (side == 10) {
            EXPECT_EQ(log.forwards.size(), 1u) << "100 changed voxels must not zoom";
        } else {
            ASSERT_GE(log.forwards.size(), 2u) << "121 changed voxels must zoom";
            EXPECT_EQ(log.forwards[1].zoom, 1.5);
        }
    }
}

// Zoom grows by 1.5 while every face keeps changing, capped at max_zoom (here 2.5: 1, 1.5,
// 2.25, 2.5): a rod along z longer than every window changes the z faces at each zoom.
TEST(InteractivePredict, AutoZoomStopsAtTheLimit) {
    auto sp = spec(64);
    sp.max_zoom = 2.5;
    auto st = state({164, 64, 64}, [](int64_t, int64_t y, int64_t x) {
        return y >= 12 && y < 52 && x >= 12 && x < 52;
    });
    int calls = 0;
    PredictionLog log;
    auto r = predict(st, sp, {82, 32, 32}, 1.0, true, false, Threshold{64 * 64 * 64, &calls}, &log);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    std::vector<double> zooms;
    for (const auto& f : log.forwards) zooms.push_back(f.zoom);
    zooms.resize(std::min<size_t>(zooms.size(), 5));
    ASSERT_EQ(zooms.size(), 5u);
    EXPECT_EQ(zooms, (std::vector<double>{1.0, 1.5, 2.25, 2.5, 1.0}));  // then refinement
    EXPECT_TRUE(same(log.forwards[3].scaled_box, Box{{2, -48, -48}, {162, 112, 112}}));
    EXPECT_EQ(log.forwards.size(), 4 + log.refinement_boxes.size());
}

// A window past the image: the network sees zeros there, the paste is clipped.
TEST(InteractivePredict, WindowPastTheImageIsPaddedAndClipped) {
    const auto sp = spec(56);
    auto st = state({40, 44, 48},
                    [](int64_t z, int64_t y, int64_t x) { return z < 6 && y < 7 && x < 8; });
    int calls = 0;
    int64_t ones = -1;
    Forward f = [&](const std::vector<float>& in, std::vector<uint8_t>& out) {
        ones = 0;
        for (int64_t i = 0; i < 56 * 56 * 56; ++i) ones += in[i] > 0.5f;
        return Threshold{56 * 56 * 56, &calls}(in, out);
    };
    PredictionLog log;
    auto r = predict(st, sp, {2, 3, 4}, 1.0, false, false, f, &log);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(ones, 6 * 7 * 8);
    EXPECT_TRUE(same(log.forwards[0].scaled_box, Box{{-26, -25, -24}, {30, 31, 32}}));
    EXPECT_TRUE(same(**r, Box{{0, 0, 0}, {30, 31, 32}}));
    int64_t target = 0;
    for (uint8_t v : st.target) target += v;
    EXPECT_EQ(target, 6 * 7 * 8);
}

// Decayed prompts reach the network divided by the current intensity (prev_seg not).
TEST(InteractivePredict, InteractionsAreNormalisedByTheIntensity) {
    const auto sp = spec(56);
    auto st = state({56, 56, 56}, [](int64_t, int64_t, int64_t) { return false; });
    const int64_t n = voxelCount(st.shape);
    st.intensity = 1.0 / (0.98 * 0.98);
    st.interactions.channel(3)[n / 2] = toHalf(static_cast<float>(st.intensity));
    st.interactions.channel(0)[n / 2] = 0x3c00;
    float point = -1, prev = -1;
    int calls = 0;
    Forward f = [&](const std::vector<float>& in, std::vector<uint8_t>& out) {
        point = in[4 * n + n / 2];
        prev = in[1 * n + n / 2];
        return Threshold{n, &calls}(in, out);
    };
    auto r = predict(st, sp, {28, 28, 28}, 1.0, false, false, f, nullptr);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(prev, 1.0f);
    EXPECT_EQ(point, fromHalf(toHalf(fromHalf(toHalf(static_cast<float>(st.intensity))) /
                                     static_cast<float>(st.intensity))));
    EXPECT_NEAR(point, 1.0f, 1e-3);
}

}  // namespace
}  // namespace voxseg::edit::interactive
