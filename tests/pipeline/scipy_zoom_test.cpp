// pipeline/scipy_zoom.h against scipy 1.17.1 itself: tests/pipeline/data/scipy_zoom/ (written by
// tests/pipeline/data/gen_scipy_zoom_golden.py) holds small volumes and what
// ndimage.zoom(float64 data, zoom, mode="nearest", order=0|1) returned for them, as
// TotalSegmentator 2.18.0 calls it, plus the .astype() casts it applies. The comparisons are
// exact on purpose (0 differing voxels, float64 bits included): TotalSegmentator parity means
// reproducing scipy's arithmetic, not approximating it. The last tests show that the goldens
// tell the order-0 tie rule and the corner alignment apart from their plausible alternatives.
#include "pipeline/scipy_zoom.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using Size3 = std::array<int64_t, 3>;

const fs::path kDir = fs::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/scipy_zoom";

json index() {
    std::ifstream f(kDir / "index.json");
    EXPECT_TRUE(f) << (kDir / "index.json");
    return f ? json::parse(f) : json();
}

json findCase(const json& gold, const std::string& name) {
    for (const json& c : gold["cases"])
        if (c["name"] == name) return c;
    ADD_FAILURE() << "no golden case " << name;
    return json();
}

// Raw little-endian file of T (this test assumes a little-endian host, as voxseg does).
template <typename T>
std::vector<T> readRaw(const std::string& name) {
    std::ifstream f(kDir / name, std::ios::binary);
    EXPECT_TRUE(f) << name;
    const auto bytes = static_cast<size_t>(fs::file_size(kDir / name));
    std::vector<T> v(bytes / sizeof(T));
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
    return v;
}

Size3 size3(const json& j) {
    return {j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>()};
}
std::array<double, 3> vec3(const json& j) {
    return {j[0].get<double>(), j[1].get<double>(), j[2].get<double>()};
}

// An oblique-free LPS grid with distinct spacings and a non-zero origin.
Geometry grid(const Size3& size) {
    Geometry g;
    g.size = size;
    g.spacing = {0.8, 0.85, 2.5};
    g.origin = {12.5, -40.25, 7.0};
    g.direction = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    return g;
}

template <typename T>
Volume volumeOf(const Size3& size, const std::vector<T>& values) {
    Volume v = Volume::allocate<T>(grid(size));
    EXPECT_EQ(static_cast<int64_t>(values.size()), v.geometry().voxelCount());
    std::copy(values.begin(), values.end(), v.data<T>());
    return v;
}

// The case's input volume, in the pixel type its file holds.
Volume caseInput(const json& c) {
    const Size3 shape = size3(c["shape_in"]);
    const std::string file = c["in"];
    const std::string ext = file.substr(file.rfind('.') + 1);
    if (ext == "i16") return volumeOf(shape, readRaw<int16_t>(file));
    if (ext == "f32") return volumeOf(shape, readRaw<float>(file));
    if (ext == "u8") return volumeOf(shape, readRaw<uint8_t>(file));
    if (ext == "u16") return volumeOf(shape, readRaw<uint16_t>(file));
    ADD_FAILURE() << "unknown input type " << file;
    return {};
}

// Voxels whose bits differ (so -0.0 vs 0.0 and NaN payloads count too).
template <typename T>
int64_t differingVoxels(const Volume& v, const std::vector<T>& expected) {
    const T* got = v.data<T>();
    EXPECT_NE(got, nullptr) << "pixel type " << pixelTypeName(v.pixelType());
    if (!got || v.geometry().voxelCount() != static_cast<int64_t>(expected.size())) return -1;
    int64_t n = 0;
    for (size_t i = 0; i < expected.size(); ++i)
        n += std::memcmp(&got[i], &expected[i], sizeof(T)) != 0;
    return n;
}

TEST(ScipyZoom, GoldensAreFromScipy) {
    const json gold = index();
    EXPECT_EQ(gold.value("scipy", ""), "1.17.1");
    EXPECT_GE(gold["cases"].size(), 10u);
}

TEST(ScipyZoom, ShapeIsScipysRoundHalfToEven) {
    const json gold = index();
    int halves = 0;
    for (const json& s : gold["shapes"]) {
        const int64_t n = s["n"];
        const double zoom = s["zoom"];
        const int64_t out = s["out"];
        EXPECT_EQ(scipyZoomShape({n, 1, 1}, {zoom, 1.0, 1.0})[0], out) << n << " * " << zoom;
        const double p = static_cast<double>(n) * zoom;
        halves += p - std::floor(p) == 0.5;
    }
    EXPECT_GE(halves, 6);  // 2.5 -> 2, 3.5 -> 4, ...: half to even, not half up
    for (const json& c : gold["cases"])
        EXPECT_EQ(scipyZoomShape(size3(c["shape_in"]), vec3(c["zoom"])), size3(c["shape_out"]))
            << c["name"];
}

TEST(ScipyZoom, StepIsCornerAligned) {
    EXPECT_EQ(scipyZoomStep({3, 9, 4}, {5, 17, 3}), (std::array<double, 3>{0.5, 0.5, 1.5}));
    // An axis of 1 voxel out reads input 0 (step 1); one of 1 voxel in has step 0.
    EXPECT_EQ(scipyZoomStep({6, 1, 1}, {1, 3, 1}), (std::array<double, 3>{1.0, 0.0, 1.0}));
}

TEST(ScipyZoom, LinearMatchesScipyBitForBit) {
    const json gold = index();
    int n_cases = 0;
    for (const json& c : gold["cases"]) {
        if (c["order"] != 1) continue;
        ++n_cases;
        SCOPED_TRACE(c["name"].get<std::string>());
        const Volume in = caseInput(c);
        const Size3 out_size = size3(c["shape_out"]);
        const auto f64 = readRaw<double>(c["out_f64"]);
        const auto i32 = readRaw<int32_t>(c["out_i32"]);

        auto r64 = zoomLinear(in, out_size, ZoomValues::kFloat64, {.threads = 1});
        ASSERT_TRUE(r64.isOk()) << r64.status().message();
        EXPECT_EQ(r64->geometry().size, out_size);
        EXPECT_EQ(differingVoxels(*r64, f64), 0);

        // TotalSegmentator's CT: .astype(np.int32); the thread count changes nothing.
        auto r32 = zoomLinear(in, out_size, ZoomValues::kInt32, {.threads = 3});
        ASSERT_TRUE(r32.isOk()) << r32.status().message();
        EXPECT_EQ(differingVoxels(*r32, i32), 0);

        std::vector<float> f32(f64.begin(), f64.end());
        auto rf = zoomLinear(in, out_size, ZoomValues::kFloat32, {.threads = 2});
        ASSERT_TRUE(rf.isOk()) << rf.status().message();
        EXPECT_EQ(differingVoxels(*rf, f32), 0);
    }
    EXPECT_EQ(n_cases, 7);
}

TEST(ScipyZoom, Int32IsTruncationTowardZeroOfNegativeValues) {
    // The CT goldens reach negative, non-integral values, where truncation and floor differ.
    const json c = findCase(index(), "ct_spacing");
    const auto f64 = readRaw<double>(c["out_f64"]);
    const auto i32 = readRaw<int32_t>(c["out_i32"]);
    ASSERT_EQ(f64.size(), i32.size());
    int64_t negative_fractions = 0;
    for (size_t i = 0; i < f64.size(); ++i) {
        EXPECT_EQ(i32[i], static_cast<int32_t>(std::trunc(f64[i])));
        negative_fractions += f64[i] < 0 && f64[i] != std::floor(f64[i]);
    }
    EXPECT_GT(negative_fractions, 100);
}

TEST(ScipyZoom, NearestMatchesScipy) {
    const json gold = index();
    int n_cases = 0;
    for (const json& c : gold["cases"]) {
        if (c["order"] != 0) continue;
        ++n_cases;
        SCOPED_TRACE(c["name"].get<std::string>());
        const Volume in = caseInput(c);
        const Size3 out_size = size3(c["shape_out"]);
        for (int threads : {1, 3}) {
            auto r = zoomNearest(in, out_size, {.threads = threads});
            ASSERT_TRUE(r.isOk()) << r.status().message();
            EXPECT_EQ(r->pixelType(), in.pixelType());
            if (in.pixelType() == PixelType::kUInt8)
                EXPECT_EQ(differingVoxels(*r, readRaw<uint8_t>(c["out"])), 0);
            else
                EXPECT_EQ(differingVoxels(*r, readRaw<uint16_t>(c["out"])), 0);
        }
    }
    EXPECT_EQ(n_cases, 5);
}

TEST(ScipyZoom, GeometryIsTotalSegmentatorsAffine) {
    const json c = findCase(index(), "ct_spacing");
    const Volume in = caseInput(c);
    const Geometry g = in.geometry();
    const auto zoom = vec3(c["zoom"]);
    const Size3 out_size = size3(c["shape_out"]);

    const Geometry z = scipyZoomGeometry(g, zoom);
    EXPECT_EQ(z.size, out_size);
    for (size_t a = 0; a < 3; ++a) EXPECT_EQ(z.spacing[a], g.spacing[a] / zoom[a]);
    EXPECT_EQ(z.origin, g.origin);
    EXPECT_EQ(z.direction, g.direction);

    auto with_zoom = zoomLinear(in, out_size, ZoomValues::kInt32, {.zoom = zoom});
    ASSERT_TRUE(with_zoom.isOk());
    EXPECT_EQ(with_zoom->geometry().spacing, z.spacing);
    EXPECT_EQ(with_zoom->geometry().origin, g.origin);

    // Without a zoom: target_shape / shape, as change_spacing(target_shape=...) computes it.
    auto by_shape = zoomNearest(caseInput(findCase(index(), "lab_back")), {31, 29, 11});
    ASSERT_TRUE(by_shape.isOk());
    const Geometry b = by_shape->geometry();
    EXPECT_EQ(b.spacing[0], 0.8 / (31.0 / 17.0));
    EXPECT_EQ(b.spacing[1], 0.85 / (29.0 / 16.0));
    EXPECT_EQ(b.spacing[2], 2.5 / (11.0 / 7.0));
    EXPECT_EQ(b.origin, grid({17, 16, 7}).origin);
}

TEST(ScipyZoom, RefusesAnEmptyAxis) {
    const Volume in = volumeOf<uint8_t>({3, 3, 3}, std::vector<uint8_t>(27, 1));
    EXPECT_EQ(scipyZoomShape({3, 3, 1}, {1.0, 1.0, 0.4})[2], 0);
    EXPECT_FALSE(zoomNearest(in, {3, 3, 0}).isOk());
    EXPECT_FALSE(zoomLinear(in, {0, 3, 3}, ZoomValues::kInt32).isOk());
    EXPECT_FALSE(zoomLinear(Volume(), {3, 3, 3}, ZoomValues::kInt32).isOk());
}

// An order-0 zoom in the test's own words: output o reads input round(coordinate(o)) along each
// axis, with `coordinate` and `round` the rule under test.
using Coordinate = std::function<double(int64_t o, int64_t n_in, int64_t n_out)>;
using Rounding = std::function<double(double)>;

std::vector<uint8_t> nearestVariant(const Volume& in, const Size3& out, const Coordinate& coord,
                                    const Rounding& round) {
    const Size3 n = in.geometry().size;
    const uint8_t* src = in.data<uint8_t>();
    std::vector<uint8_t> res;
    auto pick = [&](int64_t o, int a) {
        const auto s = static_cast<int64_t>(round(coord(o, n[a], out[a])));
        return std::clamp<int64_t>(s, 0, n[a] - 1);
    };
    for (int64_t k = 0; k < out[2]; ++k)
        for (int64_t j = 0; j < out[1]; ++j)
            for (int64_t i = 0; i < out[0]; ++i)
                res.push_back(src[pick(i, 0) + n[0] * (pick(j, 1) + n[1] * pick(k, 2))]);
    return res;
}

double cornerAligned(int64_t o, int64_t n_in, int64_t n_out) {
    return n_out > 1 ? static_cast<double>(o) *
                           (static_cast<double>(n_in - 1) / static_cast<double>(n_out - 1))
                     : 0.0;
}
double halfPixel(int64_t o, int64_t n_in, int64_t n_out) {  // skimage / resample.h's mapping
    return (static_cast<double>(o) + 0.5) * static_cast<double>(n_in) / static_cast<double>(n_out) -
           0.5;
}
double halfUp(double c) { return std::floor(c + 0.5); }
double halfToEven(double c) { return std::nearbyint(c); }

TEST(ScipyZoom, GoldensPinTheTieRuleAndTheCornerAlignment) {
    for (const char* name : {"lab_ties_up", "lab_ties_down"}) {
        SCOPED_TRACE(name);
        const json c = findCase(index(), name);
        const Volume in = caseInput(c);
        const Size3 out = size3(c["shape_out"]);
        const auto expected = readRaw<uint8_t>(c["out"]);
        auto differs = [&](const std::vector<uint8_t>& v) {
            int64_t d = 0;
            for (size_t i = 0; i < v.size(); ++i) d += v[i] != expected[i];
            return d;
        };
        EXPECT_EQ(differs(nearestVariant(in, out, cornerAligned, halfUp)), 0);
        EXPECT_GT(differs(nearestVariant(in, out, cornerAligned, halfToEven)), 0);
        EXPECT_GT(differs(nearestVariant(in, out, halfPixel, halfUp)), 0);
    }
    // The ties themselves: 3 -> 5 along i reads inputs 0, 1 (0.5 up), 1, 2 (1.5 up), 2.
    const json c = findCase(index(), "lab_ties_up");
    const Volume in = caseInput(c);
    auto r = zoomNearest(in, size3(c["shape_out"]));
    ASSERT_TRUE(r.isOk());
    const uint8_t* src = in.data<uint8_t>();
    const uint8_t* dst = r->data<uint8_t>();
    const int64_t sources[5] = {0, 1, 1, 2, 2};
    int64_t row_tells = 0;  // rows where input 0 != input 1, so rounding 0.5 down would show
    for (int64_t k = 0; k < 17; ++k)
        for (int64_t j = 0; j < 3; ++j) {
            // j: 5 -> 3 (step 2) reads 0, 2, 4; k: 9 -> 17 (step 0.5) reads round-half-up(k / 2).
            const int64_t sj = 2 * j, sk = (k + 1) / 2;
            const uint8_t* in_row = src + 3 * (sj + 5 * sk);
            for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(dst[i + 5 * (j + 3 * k)], in_row[sources[i]]);
            row_tells += in_row[0] != in_row[1];
        }
    EXPECT_GT(row_tells, 10);
}

}  // namespace
}  // namespace voxseg::pipeline
