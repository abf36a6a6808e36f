// edit/interactive/interactive_session.h's behaviour around predict(): the changed box that goes
// back, 2.6.0's single-level undo, the edit library's revert/reapply of a prompt's delta, a
// failed prediction rolled back, the capability checks and bad prompts refused with nothing lost,
// and the scribble/lasso drawing (draw_prompts.h). The network is a fake Forward with a known
// answer (foreground where the positive point channel is above 0.3); AutoZoom is off so one
// window at zoom 1 is predicted.
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/draw_prompts.h"
#include "edit/interactive/interactive_model.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace voxseg::edit::interactive {
namespace {

constexpr Index3 kShape{20, 24, 22};

InteractiveSpec testSpec() {
    InteractiveSpec spec;
    spec.patch = {12, 12, 12};
    spec.interaction_channels = 7;
    spec.prev_seg = 0;
    spec.channel_pairs = {{"bbox2d", {1, 2}},
                          {"bbox3d", {1, 2}},
                          {"lasso", {1, 2}},
                          {"points", {3, 4}},
                          {"scribble", {5, 6}}};
    spec.supported = {
        {"points", true}, {"bbox2d", true}, {"bbox3d", false}, {"scribble", true}, {"lasso", true}};
    return spec;
}

// Foreground where the (decay-normalised) positive point channel exceeds 0.3, or the positive
// box channel is set; `fail` makes the next call fail.
struct FakeNetwork {
    int calls = 0;
    bool fail = false;
    Forward forward() {
        return [this](const std::vector<float>& input, std::vector<uint8_t>& out) -> Status {
            ++calls;
            if (fail) return internalError("fake network failure");
            const size_t n = 12 * 12 * 12;
            out.assign(n, 0);
            for (size_t i = 0; i < n; ++i)
                out[i] = input[(1 + 3) * n + i] > 0.3f || input[(1 + 1) * n + i] > 0.5f;
            return Status::ok();
        };
    }
};

std::vector<float> testImage() {
    std::vector<float> v(static_cast<size_t>(kShape[0] * kShape[1] * kShape[2]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) + 1.0f;
    return v;
}

int64_t count(const std::vector<uint8_t>& m) {
    int64_t n = 0;
    for (uint8_t v : m) n += v != 0;
    return n;
}

TEST(InteractiveSession, PointPredictsAndReturnsTheChangedBox) {
    FakeNetwork net;
    InteractiveSession s(testSpec(), net.forward());
    s.setAutoZoom(false);
    ASSERT_TRUE(s.setImage(testImage(), kShape).isOk());
    auto r = s.addPoint({10, 12, 11}, true);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_TRUE(r->has_value());
    EXPECT_EQ(net.calls, 1);
    // Every changed voxel lies inside the returned box; the ball's core is foreground.
    const Box b = **r;
    const auto& t = s.target();
    EXPECT_GT(count(t), 0);
    for (int64_t z = 0; z < kShape[0]; ++z)
        for (int64_t y = 0; y < kShape[1]; ++y)
            for (int64_t x = 0; x < kShape[2]; ++x)
                if (t[(z * kShape[1] + y) * kShape[2] + x])
                    ASSERT_TRUE(z >= b.lo[0] && z < b.hi[0] && y >= b.lo[1] && y < b.hi[1] &&
                                x >= b.lo[2] && x < b.hi[2]);
    EXPECT_TRUE(t[(10 * kShape[1] + 12) * kShape[2] + 11]);
    EXPECT_TRUE(s.queued().empty());  // the prediction consumed the window
    EXPECT_EQ(s.lastLog().forwards.size(), 1u);
}

TEST(InteractiveSession, UndoIsSingleLevelAsIn260) {
    FakeNetwork net;
    InteractiveSession s(testSpec(), net.forward());
    s.setAutoZoom(false);
    ASSERT_TRUE(s.setImage(testImage(), kShape).isOk());
    ASSERT_TRUE(s.addPoint({5, 5, 5}, true).isOk());
    const std::vector<uint8_t> after_first = s.target();
    const SessionState first_state = s.state();
    ASSERT_TRUE(s.addPoint({14, 18, 16}, true).isOk());
    EXPECT_NE(s.target(), after_first);
    UndoResult u = s.undo();
    EXPECT_TRUE(u.undone);
    ASSERT_TRUE(u.changed.has_value());
    EXPECT_EQ(s.target(), after_first);
    EXPECT_EQ(s.state().interactions.bits, first_state.interactions.bits);
    EXPECT_EQ(s.state().intensity, first_state.intensity);
    EXPECT_FALSE(s.undo().undone);  // one level only
}

TEST(InteractiveSession, DeltaRevertsAndReappliesForTheEditLibrary) {
    FakeNetwork net;
    InteractiveSession s(testSpec(), net.forward());
    s.setAutoZoom(false);
    ASSERT_TRUE(s.setImage(testImage(), kShape).isOk());
    ASSERT_TRUE(s.addPoint({5, 5, 5}, true).isOk());
    auto d1 = s.takeLastDelta();
    ASSERT_TRUE(s.addBox({{9, 4, 3}, {10, 15, 12}}, true).isOk());
    auto d2 = s.takeLastDelta();
    const SessionState after = s.state();
    ASSERT_TRUE(d1 && d2);
    EXPECT_FALSE(s.undo().undone);  // taken: 2.6.0's undo has nothing left
    ASSERT_TRUE(s.revert(*d2).isOk());
    ASSERT_TRUE(s.revert(*d1).isOk());
    EXPECT_EQ(count(s.target()), 0);
    EXPECT_EQ(s.state().intensity, 1.0);
    for (uint16_t b : s.state().interactions.bits) ASSERT_EQ(b, 0);
    EXPECT_FALSE(s.revert(*d1).isOk());  // already undone
    ASSERT_TRUE(s.reapply(*d1).isOk());
    ASSERT_TRUE(s.reapply(*d2).isOk());
    EXPECT_EQ(s.target(), after.target);
    EXPECT_EQ(s.state().interactions.bits, after.interactions.bits);
    EXPECT_EQ(s.state().intensity, after.intensity);
}

TEST(InteractiveSession, FailedPredictionChangesNothing) {
    FakeNetwork net;
    InteractiveSession s(testSpec(), net.forward());
    s.setAutoZoom(false);
    ASSERT_TRUE(s.setImage(testImage(), kShape).isOk());
    ASSERT_TRUE(s.addPoint({5, 5, 5}, true).isOk());
    const SessionState before = s.state();
    net.fail = true;
    auto r = s.addPoint({12, 12, 12}, false);
    EXPECT_FALSE(r.isOk());
    EXPECT_EQ(s.target(), before.target);
    EXPECT_EQ(s.state().interactions.bits, before.interactions.bits);
    EXPECT_EQ(s.state().intensity, before.intensity);
    EXPECT_TRUE(s.queued().empty());
    net.fail = false;
    EXPECT_TRUE(s.undo().undone);  // the previous prompt's undo survives the failure
    EXPECT_EQ(count(s.target()), 0);
}

TEST(InteractiveSession, BadPromptsAreRefusedAndNothingIsLost) {
    FakeNetwork net;
    InteractiveSession s(testSpec(), net.forward());
    s.setAutoZoom(false);
    EXPECT_EQ(s.addPoint({1, 1, 1}, true).status().code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(s.setImage(testImage(), kShape).isOk());
    ASSERT_TRUE(s.addPoint({5, 5, 5}, true).isOk());
    const SessionState before = s.state();
    EXPECT_EQ(s.addPoint({20, 3, 3}, true).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.addPoint({-0.6, 3, 3}, true).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.addBox({{-5, 2, 2}, {-4, 9, 9}}, true).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(s.addBox({{2, 2, 2}, {9, 9, 9}}, true).status().code(),
              StatusCode::kUnsupported);  // 3-D box, bbox3d off
    EXPECT_EQ(s.addBox({{2, 2, 2}, {2, 9, 9}}, true).status().code(),
              StatusCode::kInvalidArgument);  // zero size
    EXPECT_EQ(s.addScribbleMask(std::vector<uint8_t>(10, 1), true).status().code(),
              StatusCode::kInvalidArgument);  // wrong shape
    EXPECT_EQ(
        s.addScribbleMask(std::vector<uint8_t>(before.target.size(), 0), true).status().code(),
        StatusCode::kInvalidArgument);  // empty
    auto lasso = s.addLasso({{4, 2, 2}, {4, 2, 10}, {4, 10, 10}}, true);
    EXPECT_EQ(lasso.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(lasso.status().message().find("does not close"), std::string::npos);
    EXPECT_EQ(s.addInitialSegmentation(std::vector<uint8_t>(3, 1)).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(s.target(), before.target);
    EXPECT_EQ(s.state().interactions.bits, before.interactions.bits);
    EXPECT_EQ(s.state().intensity, before.intensity);
    EXPECT_TRUE(s.undo().undone);  // the good prompt is still undoable

    InteractiveSpec no_points = testSpec();
    no_points.supported["points"] = false;
    InteractiveSession t(no_points, net.forward());
    ASSERT_TRUE(t.setImage(testImage(), kShape).isOk());
    EXPECT_EQ(t.addPoint({5, 5, 5}, true).status().code(), StatusCode::kUnsupported);
}

TEST(InteractiveSession, InitialSegmentationReplacesTargetAndUndoes) {
    FakeNetwork net;
    InteractiveSession s(testSpec(), net.forward());
    s.setAutoZoom(false);
    ASSERT_TRUE(s.setImage(testImage(), kShape).isOk());
    ASSERT_TRUE(s.addPoint({5, 5, 5}, true).isOk());
    const SessionState before = s.state();
    std::vector<uint8_t> seg(before.target.size(), 0);
    seg[100] = seg[2000] = 1;
    auto r = s.addInitialSegmentation(seg, false);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(s.target(), seg);
    EXPECT_EQ(s.state().intensity, 1.0);
    EXPECT_EQ(halfValue(s.state().interactions.channel(0)[100]), 1.0f);
    EXPECT_EQ(halfValue(s.state().interactions.channel(3)[(5 * 24 + 5) * 22 + 5]), 0.0f);
    EXPECT_TRUE(s.undo().undone);
    EXPECT_EQ(s.target(), before.target);
    EXPECT_EQ(s.state().interactions.bits, before.interactions.bits);
}

TEST(InteractiveSession, ScribbleAndLassoFromPointsGoToTheirChannels) {
    FakeNetwork net;
    InteractiveSession s(testSpec(), net.forward());
    s.setAutoZoom(false);
    ASSERT_TRUE(s.setImage(testImage(), kShape).isOk());
    ASSERT_TRUE(s.addScribble({{6, 3, 3}, {6, 3, 12}}, true, false).isOk());
    ASSERT_TRUE(s.addLasso({{9, 2, 2}, {9, 2, 8}, {9, 8, 8}, {9, 2, 2}}, false, false).isOk());
    const auto& st = s.state();
    auto at = [&](int c, int64_t z, int64_t y, int64_t x) {
        return halfValue(st.interactions.channel(c)[(z * kShape[1] + y) * kShape[2] + x]);
    };
    EXPECT_GT(at(5, 6, 3, 7), 0.0f);   // scribble +: on the line
    EXPECT_GT(at(5, 6, 4, 7), 0.0f);   // within half the thickness (2)
    EXPECT_EQ(at(5, 6, 5, 7), 0.0f);   // outside it
    EXPECT_EQ(at(6, 6, 3, 7), 0.0f);   // not the negative channel
    EXPECT_GT(at(2, 9, 3, 6), 0.0f);   // lasso -: inside the triangle
    EXPECT_EQ(at(2, 9, 7, 3), 0.0f);   // outside it
    EXPECT_EQ(s.queued().size(), 2u);  // run_prediction off: both windows queued
    EXPECT_EQ(net.calls, 0);
}

// A drawn prompt as a full-image mask.
std::vector<uint8_t> full(const MaskPrompt& m, Index3 shape) {
    std::vector<uint8_t> out(static_cast<size_t>(shape[0] * shape[1] * shape[2]), 0);
    const int64_t ny = m.box.hi[1] - m.box.lo[1], nx = m.box.hi[2] - m.box.lo[2];
    for (int64_t z = m.box.lo[0]; z < m.box.hi[0]; ++z)
        for (int64_t y = m.box.lo[1]; y < m.box.hi[1]; ++y)
            for (int64_t x = m.box.lo[2]; x < m.box.hi[2]; ++x)
                out[(z * shape[1] + y) * shape[2] + x] =
                    m.mask[((z - m.box.lo[0]) * ny + y - m.box.lo[1]) * nx + x - m.box.lo[2]];
    return out;
}

TEST(InteractiveSession, BoxedMaskEqualsTheFullImageMask) {
    FakeNetwork net;
    InteractiveSession a(testSpec(), net.forward()), b(testSpec(), net.forward());
    ASSERT_TRUE(a.setImage(testImage(), kShape).isOk());
    ASSERT_TRUE(b.setImage(testImage(), kShape).isOk());
    auto drawn = drawScribble({{6, 3, 3}, {6, 9, 12}}, 2.0, kShape);
    ASSERT_TRUE(drawn.isOk());
    EXPECT_EQ(drawn->box.hi[0] - drawn->box.lo[0], 1);  // one slice only
    ASSERT_TRUE(a.addScribbleMask(*drawn, true, false).isOk());
    ASSERT_TRUE(b.addScribbleMask(full(*drawn, kShape), true, false).isOk());
    EXPECT_EQ(a.state().interactions.bits, b.state().interactions.bits);
    ASSERT_EQ(a.queued().size(), 1u);
    EXPECT_EQ(a.queued()[0].center, b.queued()[0].center);
    EXPECT_EQ(a.queued()[0].zoom, b.queued()[0].zoom);
    MaskPrompt outside{{{0, 0, 0}, {1, 1, kShape[2] + 1}}, std::vector<uint8_t>(kShape[2] + 1, 1)};
    EXPECT_EQ(a.addLassoMask(outside, true, false).status().code(), StatusCode::kInvalidArgument);
    MaskPrompt wrong_size{{{0, 0, 0}, {1, 2, 2}}, std::vector<uint8_t>(3, 1)};
    EXPECT_EQ(a.addLassoMask(wrong_size, true, false).status().code(),
              StatusCode::kInvalidArgument);
}

TEST(DrawPrompts, ScribbleIsAThickPolylineOnItsSlice) {
    const Index3 shape{5, 9, 11};
    auto drawn = drawScribble({{2, 1, 1}, {2, 1, 8}, {2.4, 6, 8}}, 2.0, shape);
    ASSERT_TRUE(drawn.isOk()) << drawn.status().toString();
    const std::vector<uint8_t> m = full(*drawn, shape);
    auto at = [&](int64_t z, int64_t y, int64_t x) { return m[(z * 9 + y) * 11 + x]; };
    EXPECT_TRUE(at(2, 1, 4));   // on the first segment
    EXPECT_TRUE(at(2, 2, 4));   // within 1 voxel of it
    EXPECT_FALSE(at(2, 3, 4));  // 2 voxels away
    EXPECT_TRUE(at(2, 6, 8));   // the last point
    EXPECT_TRUE(at(2, 4, 9));
    for (int64_t z : {0, 1, 3, 4})
        for (int64_t y = 0; y < 9; ++y)
            for (int64_t x = 0; x < 11; ++x) ASSERT_FALSE(at(z, y, x));
    EXPECT_FALSE(drawScribble({{1, 1, 1}, {2, 2, 2}}, 2.0, shape).isOk());   // not one slice
    EXPECT_FALSE(drawScribble({{2, 1, 1}, {2, 1, 11}}, 2.0, shape).isOk());  // outside
}

TEST(DrawPrompts, LassoFillsTheClosedPolygon) {
    const Index3 shape{6, 10, 8};
    // A square on x = 3 (axis 2), (z, y) corners (1, 1) .. (4, 7), closed.
    auto drawn = drawLasso({{1, 1, 3}, {1, 7, 3}, {4, 7, 3}, {4, 1, 3}, {1, 1, 3}}, shape);
    ASSERT_TRUE(drawn.isOk()) << drawn.status().toString();
    const std::vector<uint8_t> m = full(*drawn, shape);
    int64_t n = 0;
    for (int64_t z = 0; z < 6; ++z)
        for (int64_t y = 0; y < 10; ++y)
            for (int64_t x = 0; x < 8; ++x) {
                const bool in = m[(z * 10 + y) * 8 + x];
                n += in;
                const bool expected = x == 3 && z >= 1 && z <= 4 && y >= 1 && y <= 7;
                ASSERT_EQ(in, expected) << z << " " << y << " " << x;
            }
    EXPECT_EQ(n, 4 * 7);
    auto open = drawLasso({{1, 1, 3}, {1, 7, 3}, {4, 7, 3}, {4, 1, 3}}, shape);
    EXPECT_FALSE(open.isOk());
    EXPECT_NE(open.status().message().find("does not close"), std::string::npos);
    EXPECT_FALSE(drawLasso({{1, 1, 3}, {1, 7, 3}, {1, 1, 3}}, shape).isOk());  // no area
}

TEST(InteractiveModelSpec, ParsesTheSectionAndNamesBadKeys) {
    const std::string good = R"({"source": "nninteractive", "session_version": "2.6.0",
      "network": "network.onnx", "patch_size": [16, 16, 16], "image_channels": 1,
      "interaction_channels": 7,
      "channel_mapping": {"prev_seg": 0, "bbox2d": [1, 2], "bbox3d": [1, 2], "lasso": [1, 2],
                          "points": [3, 4], "scribble": [5, 6]},
      "supported_interactions": {"points": true, "bbox2d": true, "bbox3d": false,
                                 "scribble": true, "lasso": true},
      "supports_initial_label": true, "point_radius": 4, "scribble_thickness": [2, 2, 2],
      "interaction_decay": 0.98, "pad_mode_image": "constant",
      "autozoom": {"max_factor": 4, "growth": 1.5}, "normalization": "nonzero_zscore",
      "num_classes": 2, "licence": "CC BY-NC-SA 4.0"})";
    auto spec = parseInteractiveSpec(good, "pkg");
    ASSERT_TRUE(spec.isOk()) << spec.status().toString();
    EXPECT_EQ(spec->patch, (Index3{16, 16, 16}));
    EXPECT_EQ(spec->channel_pairs.at("points"), std::make_pair(3, 4));
    EXPECT_FALSE(spec->supported.at("bbox3d"));
    EXPECT_EQ(spec->max_zoom, 4.0);
    EXPECT_EQ(spec->licence, "CC BY-NC-SA 4.0");
    EXPECT_EQ(spec->refinement_margin, (Index3{24, 24, 24}));  // 2.6.0's when the key is absent

    std::string margin = good;
    margin.replace(margin.find("\"num_classes\""), 0, "\"refinement_margin\": [4, 5, 7], ");
    spec = parseInteractiveSpec(margin, "pkg");
    ASSERT_TRUE(spec.isOk()) << spec.status().toString();
    EXPECT_EQ(spec->refinement_margin, (Index3{4, 5, 7}));
    margin.replace(margin.find("[4, 5, 7]"), 9, "[4, 8, 7]");  // 2 x 8 leaves no inner part of 16
    auto m = parseInteractiveSpec(margin, "pkg");
    ASSERT_FALSE(m.isOk());
    EXPECT_NE(m.status().message().find("refinement_margin"), std::string::npos)
        << m.status().message();

    std::string bad = good;
    bad.replace(bad.find("\"points\": [3, 4]"), 16, "\"points\": [3, 9]");
    auto r = parseInteractiveSpec(bad, "pkg");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("channel_mapping.points[1]"), std::string::npos)
        << r.status().message();
    bad = good;
    bad.replace(bad.find("\"constant\""), 10, "\"reflect\"");
    EXPECT_FALSE(parseInteractiveSpec(bad, "pkg").isOk());
}

TEST(InteractiveModelSpec, ArgmaxTiesGoToTheLowerClass) {
    const float logits[] = {1.0f, 2.0f, 0.5f, 1.0f, 2.0f, 3.0f};  // 2 classes x 3 voxels
    uint8_t out[3];
    argmaxClasses(logits, 2, 3, out);
    EXPECT_EQ(out[0], 0);  // 1.0 vs 1.0: tie -> class 0
    EXPECT_EQ(out[1], 0);  // 2.0 vs 2.0
    EXPECT_EQ(out[2], 1);  // 0.5 vs 3.0
}

const std::string kSource = VOXSEG_SOURCE_DIR;
const std::string kPackage = kSource + "/tests/edit/data/nninteractive/model";

TEST(InteractiveModelLoad, LoadsTheExportedPackage) {
    auto m = InteractiveModel::load(kPackage, {});
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    EXPECT_EQ((*m)->inputShape(), (engine::Shape{1, 8, 72, 80, 88}));
    EXPECT_EQ((*m)->spec().interaction_decay, 0.95);
    EXPECT_EQ((*m)->spec().channel_pairs.at("scribble"), std::make_pair(5, 6));
    EXPECT_NE((*m)->describe().find("fp32"), std::string::npos);
    // The segmentation loader refuses it, saying where it belongs.
    auto seg = engine::loadModelPackage(kPackage);
    ASSERT_FALSE(seg.isOk());
    EXPECT_NE(seg.status().message().find("interactive"), std::string::npos);
}

TEST(InteractiveModelLoad, RefusesSegmentationPackagesAndWrongChannels) {
    auto seg = InteractiveModel::load(kSource + "/sample_data/models/hippocampus", {});
    ASSERT_FALSE(seg.isOk());
    EXPECT_NE(seg.status().message().find("not an interactive package"), std::string::npos)
        << seg.status().message();

    testing::TempDir dir;
    const auto copy = dir.path() / "model";
    std::filesystem::copy(kPackage, copy);
    nlohmann::json j;
    std::ifstream(copy / "model.json") >> j;
    j["interactive"]["interaction_channels"] = 6;
    j["interactive"]["channel_mapping"]["scribble"] = {4, 5};
    j["interactive"]["channel_mapping"]["points"] = {3, 2};
    std::ofstream(copy / "model.json") << j.dump(2);
    auto wrong = InteractiveModel::load(copy, {});
    ASSERT_FALSE(wrong.isOk());
    EXPECT_NE(wrong.status().message().find("takes 8 input channels"), std::string::npos)
        << wrong.status().message();
    EXPECT_EQ(wrong.status().subject(), (copy / "network.onnx").string());
}

}  // namespace
}  // namespace voxseg::edit::interactive
