// Parity with nninteractive 2.6.0 (issue 38 item 5): tests/edit/data/nninteractive/ holds a
// package exported from a fabricated, seeded ResidualEncoderUNet model folder, a phantom, and
// what the unmodified 2.6.0 session did on it (tools/nninteractive_parity.py): every step's
// mask, every network call's zoom and window, the refinement boxes and the pasted box. This test
// replays each session through InteractiveSession with the exported network on the CPU backend
// (fp32) and compares the mask after every step (voxel agreement printed per step) and the logs.
// Masks may differ only at voxels the goldens count as near-ties of the network's logits.
#include "core/volume.h"
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "io/image_io.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

namespace voxseg::edit::interactive {
namespace {

using nlohmann::json;

const std::string kDir = std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/nninteractive/";

json sessionsJson() {
    std::ifstream f(kDir + "sessions.json");
    std::stringstream ss;
    ss << f.rdbuf();
    return json::parse(ss.str());
}

// A (z, y, x) array saved as the contract says (x fastest in the file, as voxseg's Volume).
template <typename T>
std::vector<T> readArray(const std::string& name, Index3* shape = nullptr) {
    auto v = io::readImage(kDir + name);
    EXPECT_TRUE(v.isOk()) << name << ": " << v.status().toString();
    if (!v.isOk()) return {};
    const auto size = v->geometry().size;
    if (shape) *shape = {size[2], size[1], size[0]};
    const auto n = static_cast<size_t>(size[0] * size[1] * size[2]);
    std::vector<T> out(n);
    visitPixels(*v, [&](const auto* p) {
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(p[i]);
    });
    return out;
}

Box boxOf(const json& b) {
    Box r;
    for (int a = 0; a < 3; ++a) {
        r.lo[a] = b[a][0].get<int64_t>();
        r.hi[a] = b[a][1].get<int64_t>();
    }
    return r;
}

std::string text(const Box& b) {
    return fmt::format("[[{}, {}], [{}, {}], [{}, {}]]", b.lo[0], b.hi[0], b.lo[1], b.hi[1],
                       b.lo[2], b.hi[2]);
}
std::string text(const std::optional<Box>& b) { return b ? text(*b) : "null"; }

Index3 index3(const json& j) {
    return {j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>()};
}

bool sameBox(const Box& a, const Box& b) { return a.lo == b.lo && a.hi == b.hi; }

TEST(InteractiveParity, SessionsMatchNnInteractive260) {
    const json doc = sessionsJson();
    InteractiveModelOptions options;  // CPU, fp32
    auto model = InteractiveModel::load(kDir + doc["model"].get<std::string>(), options);
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    auto volume = io::readImage(kDir + doc["image"].get<std::string>());
    ASSERT_TRUE(volume.isOk()) << volume.status().toString();
    const auto size = volume->geometry().size;
    ASSERT_EQ((Index3{size[2], size[1], size[0]}), index3(doc["image_shape_zyx"]));
    int64_t total_differ = 0, total_near_ties = 0, steps = 0;
    for (const json& s : doc["sessions"]) {
        const std::string name = s["name"].get<std::string>();
        InteractiveSession session((*model)->spec(), (*model)->forward());
        session.setAutoZoom(s["autozoom"].get<bool>());
        session.setTorchThreads(doc["torch_threads"].get<int>());  // the mean's summation order
        ASSERT_TRUE(session.setImage(*volume).isOk());  // the int16 phantom, as 2.6.0 gets it
        int k = 0;
        for (const json& step : s["steps"]) {
            const std::string op = step["op"].get<std::string>();
            const std::string where = fmt::format("{} step {} ({})", name, k++, op);
            session.seedRandom(step["np_random_seed"].get<uint32_t>());
            const auto start = std::chrono::steady_clock::now();
            Result<std::optional<Box>> r = std::optional<Box>{};
            std::optional<Box> changed;
            bool predicted = false;
            const bool include = step.value("include", true);
            if (op == "point") {
                const json& p = step["point"];
                r = session.addPoint({p[0].get<double>(), p[1].get<double>(), p[2].get<double>()},
                                     include);
                predicted = true;
            } else if (op == "bbox2d" || op == "bbox3d") {
                BoxRequest b;
                for (int a = 0; a < 3; ++a) {
                    b.lo[a] = step["bbox"][a][0].get<double>();
                    b.hi[a] = step["bbox"][a][1].get<double>();
                }
                r = session.addBox(b, include);
                predicted = true;
            } else if (op == "scribble" || op == "lasso") {
                const auto mask = readArray<uint8_t>(step["mask"].get<std::string>());
                r = op == "scribble" ? session.addScribbleMask(mask, include)
                                     : session.addLassoMask(mask, include);
                predicted = true;
            } else if (op == "initial_seg") {
                const bool run = step["run_prediction"].get<bool>();
                r = session.addInitialSegmentation(
                    readArray<uint8_t>(step["mask"].get<std::string>()), run);
                predicted = run;
            } else if (op == "undo") {
                const UndoResult u = session.undo();
                EXPECT_EQ(u.undone, step["undo_returned"].get<bool>()) << where;
                changed = u.changed;
            } else if (op == "reset") {
                ASSERT_TRUE(session.resetInteractions().isOk());
            } else {
                FAIL() << where << ": unknown op";
            }
            ASSERT_TRUE(r.isOk()) << where << ": " << r.status().toString();
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

            // The mask.
            const auto expected = readArray<uint8_t>(step["result"].get<std::string>());
            const auto& target = session.target();
            ASSERT_EQ(target.size(), expected.size()) << where;
            int64_t differ = 0;
            for (size_t i = 0; i < target.size(); ++i)
                differ += (target[i] != 0) != (expected[i] != 0);
            int64_t near_ties = 0;
            for (const json& f : step.value("forwards", json::array()))
                near_ties += f.value("near_tie_voxels", 0);
            total_differ += differ;
            total_near_ties += near_ties;
            ++steps;
            std::printf(
                "%-34s agreement %.5f %% (%lld of %zu voxels differ; %lld near-ties in its "
                "forwards), %.2f s\n",
                where.c_str(), 100.0 * (1.0 - double(differ) / double(target.size())),
                static_cast<long long>(differ), target.size(), static_cast<long long>(near_ties),
                seconds);
            EXPECT_EQ(session.state().intensity, step["intensity"].get<double>()) << where;

            // The logs of a prediction: network calls, refinement boxes, paste box.
            if (predicted) {
                const PredictionLog& log = session.lastLog();
                const json& forwards = step["forwards"];
                EXPECT_EQ(log.forwards.size(), forwards.size()) << where << ": network calls";
                for (size_t i = 0; i < std::min(log.forwards.size(), forwards.size()); ++i) {
                    EXPECT_EQ(log.forwards[i].zoom, forwards[i]["zoom"].get<double>())
                        << where << " call " << i;
                    EXPECT_TRUE(
                        sameBox(log.forwards[i].scaled_box, boxOf(forwards[i]["scaled_bbox"])))
                        << where << " call " << i << ": " << text(log.forwards[i].scaled_box)
                        << " vs " << forwards[i]["scaled_bbox"];
                }
                const json& refine = step["refinement_bboxes"];
                EXPECT_EQ(log.refinement_boxes.size(), refine.size()) << where;
                for (size_t i = 0; i < std::min(log.refinement_boxes.size(), refine.size()); ++i)
                    EXPECT_TRUE(sameBox(log.refinement_boxes[i], boxOf(refine[i])))
                        << where << " refinement box " << i << ": " << text(log.refinement_boxes[i])
                        << " vs " << refine[i];
                changed = log.paste_box;
            }
            const json& paste = step["paste_bbox"];
            if (paste.is_null())
                EXPECT_FALSE(changed.has_value()) << where << ": changed box " << text(changed);
            else
                EXPECT_TRUE(changed && sameBox(*changed, boxOf(paste)))
                    << where << ": changed box " << text(changed) << " vs " << paste;
            EXPECT_LE(differ, near_ties) << where;
        }
    }
    std::printf("%lld steps: %lld voxels differ in all (%lld near-ties counted by the goldens)\n",
                static_cast<long long>(steps), static_cast<long long>(total_differ),
                static_cast<long long>(total_near_ties));
}

}  // namespace
}  // namespace voxseg::edit::interactive
