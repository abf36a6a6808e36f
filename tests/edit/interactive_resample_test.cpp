// edit/interactive/resample.h against PyTorch itself: the goldens in
// tests/edit/data/interactive_resample (tools/gen_interactive_resample_golden.py, torch's own
// interpolate / pooling / fp16 division / NumPy's np.random.choice / Python's round) must be
// reproduced bit for bit.
#include "edit/interactive/refinement_boxes.h"
#include "edit/interactive/resample.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace voxseg::edit::interactive {
namespace {

const std::filesystem::path kDir =
    std::filesystem::path(VOXSEG_SOURCE_DIR) / "tests/edit/data/interactive_resample";

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

template <typename T>
std::vector<T> load(const std::string& name) {
    const std::string bytes = slurp(kDir / name);
    std::vector<T> v(bytes.size() / sizeof(T));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
}

Index3 shape3(const nlohmann::json& j) { return {j[0].get<int64_t>(), j[1], j[2]}; }

const nlohmann::json& index() {
    static const nlohmann::json j = nlohmann::json::parse(slurp(kDir / "index.json"));
    return j;
}

// Number of elements whose bits differ; prints the first few.
template <typename T>
int64_t mismatches(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
    EXPECT_EQ(got.size(), want.size()) << what;
    int64_t bad = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
            if (bad < 3) {
                if constexpr (std::is_same_v<T, uint16_t>)
                    ADD_FAILURE() << what << " [" << i << "]: " << fromHalf(got[i])
                                  << " != " << fromHalf(want[i]);
                else
                    ADD_FAILURE() << what << " [" << i << "]: " << +got[i] << " != " << +want[i];
            }
            ++bad;
        }
    }
    return bad;
}

void runCases(const std::string& kind) {
    int cases = 0;
    for (const auto& c : index()["cases"]) {
        if (c["kind"] != kind) continue;
        ++cases;
        const Index3 in = shape3(c["in_shape"]), out = shape3(c["out_shape"]);
        std::ostringstream what;
        what << kind << " " << c["input"].get<std::string>() << " " << c["in_shape"] << " -> "
             << c["out_shape"];
        int64_t bad = 0;
        if (kind == "trilinear") {
            const auto x = load<float>(c["input"]);
            bad = mismatches(resizeTrilinear(x.data(), in, out), load<float>(c["output"]),
                             what.str());
        } else {
            auto x = load<uint16_t>(c["input"]);
            const auto want = load<uint16_t>(c["output"]);
            std::vector<uint16_t> got;
            if (kind == "nearest") got = resizeNearest(x.data(), in, out);
            if (kind == "area") {
                got = resizeArea(x.data(), in, out);
                // The same with the nonzero box as support (outputs outside it skipped).
                Box nz{{in[0], in[1], in[2]}, {0, 0, 0}};
                for (int64_t z = 0; z < in[0]; ++z)
                    for (int64_t y = 0; y < in[1]; ++y)
                        for (int64_t x0 = 0; x0 < in[2]; ++x0)
                            if (x[(z * in[1] + y) * in[2] + x0]) {
                                const Index3 v{z, y, x0};
                                for (int d = 0; d < 3; ++d) {
                                    nz.lo[d] = std::min(nz.lo[d], v[d]);
                                    nz.hi[d] = std::max(nz.hi[d], v[d] + 1);
                                }
                            }
                EXPECT_EQ(mismatches(resizeArea(x.data(), in, out, &nz), want, what.str()), 0)
                    << "with support";
            }
            if (kind == "maxpool") got = poolSame(x.data(), in, c["k"].get<int>(), false);
            if (kind == "minpool") got = poolSame(x.data(), in, c["k"].get<int>(), true);
            if (kind == "divide") {
                divideHalf(x.data(), static_cast<int64_t>(x.size()), c["divisor"].get<double>());
                got = x;
            }
            bad = mismatches(got, want, what.str());
        }
        EXPECT_EQ(bad, 0) << what.str();
    }
    EXPECT_GT(cases, 0) << "no " << kind << " cases in the goldens";
}

TEST(InteractiveResample, NearestMatchesTorch) { runCases("nearest"); }
TEST(InteractiveResample, AreaMatchesTorch) { runCases("area"); }
TEST(InteractiveResample, TrilinearMatchesTorch) { runCases("trilinear"); }
TEST(InteractiveResample, MaxPoolMatchesNnInteractive) { runCases("maxpool"); }
TEST(InteractiveResample, MinPoolMatchesNnInteractive) { runCases("minpool"); }
TEST(InteractiveResample, HalfDivisionMatchesTorch) { runCases("divide"); }

// resizeArea with a support box equals the full computation (validated above) on sparse input.
TEST(InteractiveResample, AreaWithSupportEqualsFullArea) {
    std::mt19937 rng(38);
    for (const auto& [in, out] : std::vector<std::pair<Index3, Index3>>{
             {{96, 90, 101}, {64, 60, 64}}, {{49, 33, 70}, {17, 33, 29}}}) {
        std::vector<uint16_t> x(static_cast<size_t>(voxelCount(in)), 0);
        const Box nz{{in[0] - 9, 3, 40}, {in[0] - 2, 11, 52}};
        for (int64_t z = nz.lo[0]; z < nz.hi[0]; ++z)
            for (int64_t y = nz.lo[1]; y < nz.hi[1]; ++y)
                for (int64_t x0 = nz.lo[2]; x0 < nz.hi[2]; ++x0)
                    x[(z * in[1] + y) * in[2] + x0] =
                        toHalf(static_cast<float>(rng() % 1000) / 300);
        EXPECT_EQ(mismatches(resizeArea(x.data(), in, out, &nz), resizeArea(x.data(), in, out),
                             "support"),
                  0);
    }
}

TEST(InteractiveResample, NumpyChoiceMatchesNumpy) {
    for (const auto& s : index()["numpy_choice"]) {
        std::mt19937 rng(s["seed"].get<uint32_t>());
        for (const auto& d : s["draws"]) {
            const int64_t n = d[0];
            for (const auto& want : d[1])
                EXPECT_EQ(numpyChoice(rng, n), want.get<int64_t>())
                    << "seed " << s["seed"] << " n " << n;
        }
    }
}

// generate_bounding_boxes itself (greedy cover, stride halving, NumPy-random fallback) on blob
// masks, np.random seeded alike: the same boxes in the same order.
TEST(InteractiveResample, RefinementBoxesMatchNnInteractive) {
    ASSERT_TRUE(index().contains("cover"));
    for (const auto& c : index()["cover"]) {
        const Index3 shape = shape3(c["shape"]), patch = shape3(c["patch"]);
        const auto bits = load<uint8_t>(c["mask_bits"]);
        std::vector<uint8_t> mask(static_cast<size_t>(voxelCount(shape)));
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = (bits[i / 8] >> (7 - i % 8)) & 1;
        std::mt19937 rng(c["seed"].get<uint32_t>());
        const auto boxes = coverWithBoxes(mask, shape, patch, {24, 24, 24}, 3, rng);
        ASSERT_EQ(boxes.size(), c["boxes"].size()) << "patch " << c["patch"];
        for (size_t i = 0; i < boxes.size(); ++i)
            for (int d = 0; d < 3; ++d) {
                EXPECT_EQ(boxes[i].lo[d], c["boxes"][i][d][0].get<int64_t>()) << i;
                EXPECT_EQ(boxes[i].hi[d], c["boxes"][i][d][1].get<int64_t>()) << i;
            }
    }
}

TEST(InteractiveResample, PythonRounding) {
    for (const auto& r : index()["round"])
        EXPECT_EQ(roundHalfEven(r[0].get<double>()), r[1].get<int64_t>()) << r[0];
    for (const auto& r : index()["round_to_nearest_odd"])
        EXPECT_EQ(roundToNearestOdd(r[0].get<double>()), r[1].get<int>()) << r[0];
}

TEST(InteractiveResample, CropAndPasteHandleBoxesPastTheVolume) {
    const Index3 shape{3, 4, 5};
    std::vector<int> vol(60);
    for (int i = 0; i < 60; ++i) vol[i] = i + 1;
    const Box box{{-1, 2, 3}, {2, 6, 7}};  // 3 x 4 x 4, partly outside
    std::vector<int> win(48, 0);
    cropInto(vol.data(), shape, box, win.data());
    for (int z = 0; z < 3; ++z)
        for (int y = 0; y < 4; ++y)
            for (int x = 0; x < 4; ++x) {
                const int gz = z - 1, gy = y + 2, gx = x + 3;
                const bool inside = gz >= 0 && gy < 4 && gx < 5;
                EXPECT_EQ(win[(z * 4 + y) * 4 + x], inside ? vol[(gz * 4 + gy) * 5 + gx] : 0);
            }
    std::vector<int> target(60, 0);
    pasteInto(win.data(), box, target.data(), shape, [](int v) { return v; });
    for (int i = 0; i < 60; ++i) {
        const int z = i / 20, y = (i / 5) % 4, x = i % 5;
        EXPECT_EQ(target[i], (z <= 1 && y >= 2 && x >= 3) ? vol[i] : 0) << i;
    }
    ASSERT_TRUE(clipBox(box, shape).has_value());
    EXPECT_EQ(clipBox(box, shape)->lo, (Index3{0, 2, 3}));
    EXPECT_EQ(clipBox(box, shape)->hi, (Index3{2, 4, 5}));
    EXPECT_FALSE(clipBox(Box{{3, 0, 0}, {5, 1, 1}}, shape).has_value());
}

}  // namespace
}  // namespace voxseg::edit::interactive
