// image_io on real files from ../shared/data (label "data"): geometry and voxels are checked
// against values parsed here independently of ITK (NRRD header text, raw big-endian NIfTI bytes).
#include "io/image_io.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace voxseg::io {
namespace {
using voxseg::testing::sharedData;
using voxseg::testing::TempDir;

constexpr double kTol = 1e-6;  // headers are read as doubles (NRRD) or exact small floats (NIfTI)

std::vector<double> numbersIn(const std::string& s) {
    std::vector<double> out;
    std::regex num(R"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), num); it != std::sregex_iterator();
         ++it)
        out.push_back(std::stod(it->str()));
    return out;
}

// pyradiomics brain1: LPS NRRD with a negative cosine (j axis points anterior), gzip encoding.
TEST(ImageIoData, PyradiomicsLpsNrrdGeometryMatchesItsHeader) {
    VOXSEG_REQUIRE_DATA("pyradiomics-data/brain1_image.nrrd");
    const std::string path = sharedData("pyradiomics-data/brain1_image.nrrd").string();
    std::ifstream in(path, std::ios::binary);
    std::string line, directions, origin;
    while (std::getline(in, line) && !line.empty()) {
        if (line.rfind("space directions:", 0) == 0) directions = line.substr(17);
        if (line.rfind("space origin:", 0) == 0) origin = line.substr(13);
    }
    const auto d = numbersIn(directions);
    const auto o = numbersIn(origin);
    ASSERT_EQ(d.size(), 9u);
    ASSERT_EQ(o.size(), 3u);

    auto v = readImage(path);
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    const Geometry g = v->geometry();
    EXPECT_EQ(g.size, (std::array<int64_t, 3>{256, 256, 25}));
    EXPECT_EQ(v->pixelType(), PixelType::kInt16);
    for (int axis = 0; axis < 3; ++axis) {
        const double len = std::sqrt(d[axis * 3] * d[axis * 3] + d[axis * 3 + 1] * d[axis * 3 + 1] +
                                     d[axis * 3 + 2] * d[axis * 3 + 2]);
        EXPECT_NEAR(g.spacing[axis], len, kTol);
        for (int r = 0; r < 3; ++r)
            EXPECT_NEAR(g.direction[r * 3 + axis], d[axis * 3 + r] / len, kTol);
        EXPECT_NEAR(g.origin[axis], o[axis], kTol);
    }
    EXPECT_LT(g.direction[4], 0.0) << "j axis must point anterior (negative cosine)";
    EXPECT_EQ(g.orientationCode(), "LAS");

    // Through every writer and back.
    TempDir dir;
    for (const char* ext : {".nii.gz", ".nrrd", ".mha"}) {
        const std::string out = dir / (std::string("brain1") + ext);
        ASSERT_TRUE(writeImage(*v, out).isOk()) << ext;
        auto back = readImage(out);
        ASSERT_TRUE(back.isOk()) << back.status().toString();
        EXPECT_TRUE(back->geometry().approxEqual(g, kTol, kTol, kTol)) << ext;
        EXPECT_EQ(
            std::memcmp(back->rawData(), v->rawData(), static_cast<size_t>(g.voxelCount()) * 2), 0)
            << ext;
    }
}

// MONAI's anatomical.nii is big-endian int16; the affine (RAS) is diag(-2, 2, 2) + (32, -40, -16).
TEST(ImageIoData, MonaiBigEndianNiftiVoxelsAndGeometry) {
    VOXSEG_REQUIRE_DATA("monai-testing-data/anatomical.nii");
    const std::string path = sharedData("monai-testing-data/anatomical.nii").string();
    auto v = readImage(path);
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    const Geometry g = v->geometry();
    ASSERT_EQ(g.size, (std::array<int64_t, 3>{33, 41, 25}));
    ASSERT_EQ(v->pixelType(), PixelType::kInt16);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(g.spacing[i], 2.0, kTol);
    // RAS -> LPS: negate rows 0 and 1 of the affine.
    const Mat3 expect_dir{1, 0, 0, 0, -1, 0, 0, 0, 1};
    for (int i = 0; i < 9; ++i) EXPECT_NEAR(g.direction[i], expect_dir[i], kTol) << i;
    EXPECT_NEAR(g.origin[0], -32.0, kTol);
    EXPECT_NEAR(g.origin[1], 40.0, kTol);
    EXPECT_NEAR(g.origin[2], -16.0, kTol);

    // Voxels against the raw big-endian bytes after the 352-byte header.
    std::ifstream in(path, std::ios::binary);
    in.seekg(352);
    std::vector<unsigned char> raw(static_cast<size_t>(g.voxelCount()) * 2);
    in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
    ASSERT_TRUE(in.good());
    const int16_t* p = v->data<int16_t>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < g.voxelCount(); ++i) {
        const auto be = static_cast<int16_t>((raw[2 * i] << 8) | raw[2 * i + 1]);
        mismatches += (be != p[i]);
    }
    EXPECT_EQ(mismatches, 0);
}

TEST(ImageIoData, NiftiGzLabelMapReads) {
    VOXSEG_REQUIRE_DATA("monai-testing-data/anatomical_label.nii.gz");
    auto v = readImage(sharedData("monai-testing-data/anatomical_label.nii.gz").string());
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    EXPECT_EQ(v->pixelType(), PixelType::kUInt16);
    EXPECT_EQ(v->geometry().size, (std::array<int64_t, 3>{33, 41, 25}));
}

}  // namespace
}  // namespace voxseg::io
