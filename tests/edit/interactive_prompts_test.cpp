// edit/interactive's prompt rasterisers, decay, undo and normalisation against nninteractive
// 2.6.0 itself: tests/edit/data/interactive_prompts.json (tools/gen_interactive_prompt_golden.py)
// replays the same prompts (run_prediction off) on the same image and records 2.6.0's fp16
// prompt channels, intensity and queued windows after every step. Bit-exact equality is the
// contract here (the network sees these values), so the comparisons are exact.
#include "core/sha256.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/prompts.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

namespace voxseg::edit::interactive {
namespace {

using nlohmann::json;

json golden() {
    std::ifstream f(std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/interactive_prompts.json");
    EXPECT_TRUE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    return json::parse(ss.str());
}

Index3 index3(const json& j) {
    return {j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>()};
}

// The generator's image_values(): integer hash values times 0.25 inside a border, 0 outside.
std::vector<float> imageValues(Index3 shape, const json& border) {
    std::vector<float> v(static_cast<size_t>(shape[0] * shape[1] * shape[2]));
    for (int64_t z = 0; z < shape[0]; ++z)
        for (int64_t y = 0; y < shape[1]; ++y)
            for (int64_t x = 0; x < shape[2]; ++x) {
                const int64_t flat = (z * shape[1] + y) * shape[2] + x;
                const Index3 p{z, y, x};
                bool inside = true;
                for (int a = 0; a < 3; ++a)
                    inside = inside && p[a] >= border[a][0].get<int64_t>() &&
                             p[a] < shape[a] - border[a][1].get<int64_t>();
                const auto value = static_cast<float>((flat * 7919 + 13) % 2003 - 700) * 0.25f;
                v[static_cast<size_t>(flat)] = inside ? value : 0.0f;
            }
    return v;
}

InteractiveSpec specFor(const json& doc, const json& session) {
    InteractiveSpec spec;
    spec.patch = index3(doc["patch"]);
    spec.interaction_channels = 7;
    spec.prev_seg = doc["channel_mapping"]["prev_seg"].get<int>();
    for (const auto& [name, v] : doc["channel_mapping"].items())
        if (name != "prev_seg") spec.channel_pairs[name] = {v[0].get<int>(), v[1].get<int>()};
    for (const auto& [name, v] : session["supported"].items()) spec.supported[name] = v.get<bool>();
    spec.point_radius = doc["point_radius"].get<int>();
    spec.interaction_decay = session["decay"].get<double>();
    return spec;
}

std::vector<uint8_t> maskFrom(const json& indices, Index3 shape) {
    std::vector<uint8_t> m(static_cast<size_t>(shape[0] * shape[1] * shape[2]), 0);
    for (const auto& i : indices) m[i.get<size_t>()] = 1;
    return m;
}

BoxRequest boxFrom(const json& b) {
    BoxRequest r;
    for (int a = 0; a < 3; ++a) {
        r.lo[a] = b[a][0].get<double>();
        r.hi[a] = b[a][1].get<double>();
    }
    return r;
}

std::string channelsSha(const SessionState& state) {
    std::string bytes(state.interactions.bits.size() * 2, '\0');
    for (size_t i = 0; i < state.interactions.bits.size(); ++i) {
        bytes[2 * i] = static_cast<char>(state.interactions.bits[i] & 0xff);
        bytes[2 * i + 1] = static_cast<char>(state.interactions.bits[i] >> 8);
    }
    return sha256Hex(bytes);
}

// The first channel entry that differs from 2.6.0's list of nonzero [channel, voxel, bits].
std::string firstDifference(const SessionState& state, const json& entries) {
    std::vector<uint16_t> expected(state.interactions.bits.size(), 0);
    const int64_t n = state.interactions.voxels();
    for (const auto& e : entries)
        expected[static_cast<size_t>(e[0].get<int64_t>() * n + e[1].get<int64_t>())] =
            e[2].get<uint16_t>();
    for (size_t i = 0; i < expected.size(); ++i)
        if (expected[i] != state.interactions.bits[i])
            return "channel " + std::to_string(i / n) + " voxel " + std::to_string(i % n) +
                   ": voxseg " + std::to_string(state.interactions.bits[i]) + " (" +
                   std::to_string(halfValue(state.interactions.bits[i])) + "), 2.6.0 " +
                   std::to_string(expected[i]) + " (" + std::to_string(halfValue(expected[i])) +
                   ")";
    return "none";
}

Forward noNetwork() {
    return [](const std::vector<float>&, std::vector<uint8_t>&) {
        return internalError("no prediction expected in this test");
    };
}

TEST(InteractivePrompts, PointKernelsMatchBuildPoint) {
    const json doc = golden();
    for (const auto& [radius, values] : doc["point_kernels"].items()) {
        auto k = pointKernel(std::stod(radius));
        ASSERT_TRUE(k.isOk()) << k.status().toString();
        ASSERT_EQ(k->values.size(), values.size()) << "radius " << radius;
        for (size_t i = 0; i < values.size(); ++i)
            ASSERT_EQ(k->values[i], values[i].get<double>()) << "radius " << radius << " at " << i;
    }
    EXPECT_FALSE(pointKernel(2.5).isOk());
}

TEST(InteractivePrompts, NormalisationMatchesSetImage) {
    const json doc = golden();
    for (const auto& case_ : doc["normalisation"]) {
        const Index3 shape = index3(case_["shape"]);
        InteractiveSpec spec;
        InteractiveSession session(spec, noNetwork());
        const int threads = case_["torch_threads"].get<int>();
        session.setTorchThreads(threads);
        ASSERT_TRUE(session.setImage(imageValues(shape, case_["border"]), shape).isOk());
        const std::vector<float>& image = session.state().image;
        auto bitsOf = [](float f) {
            uint32_t u;
            std::memcpy(&u, &f, 4);
            return u;
        };
        const json& all = case_["normalised_bits"];
        int64_t differ = 0, checked = 0;
        if (!all.is_null()) {
            for (size_t i = 0; i < image.size(); ++i, ++checked)
                differ += bitsOf(image[i]) != all[i].get<uint32_t>();
        }
        const json& sample = case_["sample_bits"];
        for (size_t k = 0; k < sample.size(); ++k, ++checked)
            differ += bitsOf(image[k * 97]) != sample[k].get<uint32_t>();
        EXPECT_EQ(differ, 0) << differ << " of " << checked << " normalised values differ from "
                             << "torch's for the " << shape[0] << "x" << shape[1] << "x" << shape[2]
                             << " image with " << threads << " torch thread(s)";
    }
}

TEST(InteractivePrompts, SessionsMatchNnInteractive) {
    const json doc = golden();
    const Index3 shape = index3(doc["shape"]);
    for (const auto& s : doc["sessions"]) {
        const std::string name = s["name"].get<std::string>();
        InteractiveSession session(specFor(doc, s), noNetwork());
        json border = json::array({json::array({1, 2}), json::array({2, 1}), json::array({0, 1})});
        ASSERT_TRUE(session.setImage(imageValues(shape, border), shape).isOk());
        int k = 0;
        for (const auto& step : s["steps"]) {
            const std::string op = step["op"].get<std::string>();
            const std::string where = name + " step " + std::to_string(k++) + " (" + op + ")";
            Status status;
            bool undo_returned = false;
            if (op == "point") {
                const json& p = step["point"];
                status = session
                             .addPoint({p[0].get<double>(), p[1].get<double>(), p[2].get<double>()},
                                       step["include"].get<bool>(), false)
                             .status();
            } else if (op == "box") {
                status = session.addBox(boxFrom(step["box"]), step["include"].get<bool>(), false)
                             .status();
            } else if (op == "scribble") {
                status = session
                             .addScribbleMask(maskFrom(step["mask"], shape),
                                              step["include"].get<bool>(), false)
                             .status();
            } else if (op == "lasso") {
                status = session
                             .addLassoMask(maskFrom(step["mask"], shape),
                                           step["include"].get<bool>(), false)
                             .status();
            } else if (op == "initial_seg") {
                status =
                    session.addInitialSegmentation(maskFrom(step["mask"], shape), false).status();
            } else if (op == "undo") {
                undo_returned = session.undo().undone;
            } else if (op == "reset") {
                status = session.resetInteractions();
            }
            EXPECT_EQ(status.isOk(), step["error"].is_null())
                << where << ": voxseg says \"" << status.toString() << "\", 2.6.0 "
                << step["error"];
            if (step.contains("undo_returned"))
                EXPECT_EQ(undo_returned, step["undo_returned"].get<bool>()) << where;
            EXPECT_EQ(session.state().intensity, step["intensity"].get<double>()) << where;
            const auto& queue = session.queued();
            ASSERT_EQ(queue.size(), step["queue"].size()) << where;
            for (size_t i = 0; i < queue.size(); ++i) {
                EXPECT_EQ(queue[i].center, index3(step["queue"][i][0])) << where << " window " << i;
                EXPECT_EQ(queue[i].zoom, step["queue"][i][1].get<double>())
                    << where << " window " << i;
            }
            int64_t target_sum = 0;
            for (uint8_t v : session.target()) target_sum += v;
            EXPECT_EQ(target_sum, step["target_sum"].get<int64_t>()) << where;
            const bool same = channelsSha(session.state()) == step["channels_sha256"];
            EXPECT_TRUE(same) << where << ": prompt channels differ from 2.6.0's; first: "
                              << (step["channels"].is_null()
                                      ? std::string("(golden lists only counts)")
                                      : firstDifference(session.state(), step["channels"]));
            for (int c = 0; c < 7; ++c) {
                const uint16_t* bits = session.state().interactions.channel(c);
                int64_t nonzero = 0;
                for (int64_t i = 0; i < session.state().interactions.voxels(); ++i)
                    nonzero += bits[i] != 0;
                EXPECT_EQ(nonzero, step["channel_nonzero"][c].get<int64_t>())
                    << where << " channel " << c;
            }
        }
    }
}

TEST(InteractivePrompts, HalfConversionsMatchTorchAndNumpy) {
    // [value, torch fill (box write), NumPy multiply (mask write), torch float64 -> float16
    // (point kernel)] from the generator.
    const json doc = golden();  // kept: a range-for over golden()[...] would outlive it
    for (const auto& c : doc["half_conversions"]) {
        const double v = c[0].get<double>();
        EXPECT_EQ(halfFromDoubleTorch(v), c[1].get<uint16_t>()) << "torch fill of " << v;
        EXPECT_EQ(halfFromDoubleNumpy(v), c[2].get<uint16_t>()) << "numpy multiply by " << v;
        EXPECT_EQ(halfFromDoubleTorch(v), c[3].get<uint16_t>()) << "torch cast of " << v;
    }
}

TEST(InteractivePrompts, HalfConversionsRoundAsTorchAndNumpy) {
    // 1 + 2^-11 + 2^-40: above the half-way point between two halves in double, but the
    // double -> float step rounds it onto that half-way point first, which then goes to even.
    const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
    EXPECT_EQ(halfFromDoubleNumpy(v), 0x3c01);  // one rounding: up
    EXPECT_EQ(halfFromDoubleTorch(v), 0x3c00);  // float first: exactly half-way, to even
    EXPECT_EQ(roundHalfEven(2.5), 2);
    EXPECT_EQ(roundHalfEven(3.5), 4);
    EXPECT_EQ(roundHalfEven(-0.5), 0);
    EXPECT_EQ(roundHalfEven(-1.5), -2);
}

}  // namespace
}  // namespace voxseg::edit::interactive
