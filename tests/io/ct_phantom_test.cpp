// The CT phantom (io/ct_phantom.h): same seed same voxels, tissue intensities in their documented
// HU ranges, anatomy where it belongs (left/right, up/down, front/back, plausible volumes), and
// the written study (DICOM through our own loader, labels through NIfTI) on one grid.
#include "io/ct_phantom.h"
#include "io/dicom_series.h"
#include "io/image_io.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace voxseg::io {
namespace {

using voxseg::testing::TempDir;

// A smaller phantom than the default keeps the tests quick; the anatomy spans the same mm.
CtPhantomSpec smallSpec(uint32_t seed) {
    CtPhantomSpec s;
    s.seed = seed;
    s.size = {128, 128, 75};
    s.spacing = {3.0, 3.0, 4.0};
    return s;
}

struct LabelStats {
    int64_t voxels = 0;
    Vec3 centroid{0, 0, 0};            // mm, LPS
    std::vector<int16_t> interior_hu;  // voxels whose 6 neighbours share the label
};

std::array<LabelStats, kPhantomLabelCount + 1> labelStats(const CtPhantom& p) {
    std::array<LabelStats, kPhantomLabelCount + 1> out{};
    const Geometry g = p.labels.geometry();
    const uint8_t* l = p.labels.data<uint8_t>();
    const int16_t* h = p.hu.data<int16_t>();
    const int64_t nx = g.size[0], ny = g.size[1], nz = g.size[2];
    for (int64_t k = 0; k < nz; ++k)
        for (int64_t j = 0; j < ny; ++j)
            for (int64_t i = 0; i < nx; ++i) {
                const int64_t idx = (k * ny + j) * nx + i;
                LabelStats& s = out[l[idx]];
                ++s.voxels;
                const Vec3 x = g.indexToPhysical(
                    {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)});
                for (int a = 0; a < 3; ++a) s.centroid[a] += x[a];
                if (i > 0 && j > 0 && k > 0 && i < nx - 1 && j < ny - 1 && k < nz - 1 &&
                    l[idx - 1] == l[idx] && l[idx + 1] == l[idx] && l[idx - nx] == l[idx] &&
                    l[idx + nx] == l[idx] && l[idx - nx * ny] == l[idx] &&
                    l[idx + nx * ny] == l[idx])
                    s.interior_hu.push_back(h[idx]);
            }
    for (auto& s : out)
        for (auto& c : s.centroid) c /= std::max<int64_t>(s.voxels, 1);
    return out;
}

double median(std::vector<int16_t> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

double stddev(const std::vector<int16_t>& v) {
    double m = 0, q = 0;
    for (auto x : v) m += x;
    m /= std::max<size_t>(v.size(), 1);
    for (auto x : v) q += (x - m) * (x - m);
    return std::sqrt(q / std::max<size_t>(v.size(), 1));
}

TEST(CtPhantom, SameSeedSameVoxelsOtherSeedOtherStudy) {
    const auto a = makeCtPhantom(smallSpec(5));
    const auto b = makeCtPhantom(smallSpec(5));
    const auto c = makeCtPhantom(smallSpec(6));
    ASSERT_TRUE(a.isOk() && b.isOk() && c.isOk());
    const int64_t n = a->hu.geometry().voxelCount();
    EXPECT_TRUE(
        std::equal(a->hu.data<int16_t>(), a->hu.data<int16_t>() + n, b->hu.data<int16_t>()));
    EXPECT_TRUE(std::equal(a->labels.data<uint8_t>(), a->labels.data<uint8_t>() + n,
                           b->labels.data<uint8_t>()));
    EXPECT_FALSE(std::equal(a->labels.data<uint8_t>(), a->labels.data<uint8_t>() + n,
                            c->labels.data<uint8_t>()));
    // The thread count does not change the result (noise is seeded per slice).
    CtPhantomSpec one = smallSpec(5);
    one.threads = 1;
    const auto d = makeCtPhantom(one);
    ASSERT_TRUE(d.isOk());
    EXPECT_TRUE(
        std::equal(a->hu.data<int16_t>(), a->hu.data<int16_t>() + n, d->hu.data<int16_t>()));
}

TEST(CtPhantom, OrgansHaveTheirDocumentedIntensities) {
    for (uint32_t seed : {1u, 2u, 3u, 4u}) {
        CtPhantomSpec spec = smallSpec(seed);
        spec.noise_hu = 0;  // exact tissue values (plus the texture) inside organs
        const auto p = makeCtPhantom(spec);
        ASSERT_TRUE(p.isOk());
        const auto s = labelStats(*p);
        const PhantomTissues& t = p->tissues;
        SCOPED_TRACE("seed " + std::to_string(seed));
        // Drawn values inside the documented ranges (ct_phantom.cpp).
        EXPECT_GE(t.fat, -110);
        EXPECT_LE(t.fat, -90);
        EXPECT_GE(t.muscle, 40);
        EXPECT_LE(t.muscle, 55);
        // Medians of organ interiors (texture is at most +-4 HU in solid organs).
        constexpr double kTextureHu = 6.0;
        EXPECT_NEAR(median(s[1].interior_hu), t.liver, kTextureHu);
        EXPECT_GE(t.liver, 55);
        EXPECT_LE(t.liver, 65);
        EXPECT_NEAR(median(s[2].interior_hu), t.spleen, kTextureHu);
        EXPECT_GE(t.spleen, 44);
        EXPECT_LE(t.spleen, 52);
        for (int kidney : {3, 4}) {
            const double m = median(s[kidney].interior_hu);
            EXPECT_GE(m, t.kidney_medulla - 1);
            EXPECT_LE(m, t.kidney_cortex + 1);
        }
        EXPECT_GE(t.kidney_medulla, 30);
        EXPECT_LE(t.kidney_medulla, 40);
        for (int lung : {5, 6}) {
            EXPECT_GE(median(s[lung].interior_hu), -890);
            EXPECT_LE(median(s[lung].interior_hu), -800);
        }
        EXPECT_GE(median(s[7].interior_hu), 350);
        EXPECT_LE(median(s[7].interior_hu), 1100);
        const bool arterial = p->phase == ContrastPhase::kArterial;
        EXPECT_NEAR(median(s[8].interior_hu), t.aorta, 2.0);
        EXPECT_GE(t.aorta, arterial ? 200 : 35);
        EXPECT_LE(t.aorta, arterial ? 350 : 50);
        // Air in the corner.
        EXPECT_EQ(p->hu.data<int16_t>()[0], -1000);
    }
}

TEST(CtPhantom, NoiseHasTheRequestedLevel) {
    CtPhantomSpec spec = smallSpec(9);
    spec.noise_hu = 15;
    const auto p = makeCtPhantom(spec);
    ASSERT_TRUE(p.isOk());
    const auto s = labelStats(*p);
    // Liver interior: noise (after smoothing) plus a few HU of texture.
    EXPECT_GT(stddev(s[1].interior_hu), 12.0);
    EXPECT_LT(stddev(s[1].interior_hu), 20.0);
    // Random level when not given: within 10..20 HU.
    const auto r = makeCtPhantom(smallSpec(10));
    ASSERT_TRUE(r.isOk());
    EXPECT_GE(r->noise_hu, 10.0);
    EXPECT_LE(r->noise_hu, 20.0);
}

TEST(CtPhantom, AnatomyIsWhereItBelongs) {
    for (uint32_t seed = 11; seed < 17; ++seed) {
        const auto p = makeCtPhantom(smallSpec(seed));
        ASSERT_TRUE(p.isOk());
        const auto s = labelStats(*p);
        SCOPED_TRACE("seed " + std::to_string(seed));
        const double ml = 3.0 * 3.0 * 4.0 / 1000.0;  // mL per voxel
        for (int l = 1; l <= kPhantomLabelCount; ++l)
            EXPECT_GT(s[l].voxels, 0) << phantomLabelName(l);
        // LPS: +x is the patient's left, +y posterior, +z superior.
        EXPECT_LT(s[1].centroid[0], 0);  // liver on the right
        EXPECT_GT(s[2].centroid[0], 0);  // spleen on the left
        EXPECT_GT(s[3].centroid[0], 30);
        EXPECT_LT(s[4].centroid[0], -30);
        EXPECT_GT(s[5].centroid[0], 30);
        EXPECT_LT(s[6].centroid[0], -30);
        EXPECT_GT(s[5].centroid[2], s[1].centroid[2]);  // lungs above the liver
        EXPECT_GT(s[1].centroid[2], s[4].centroid[2]);  // liver above the right kidney
        EXPECT_GT(s[7].centroid[1], s[8].centroid[1]);  // spine behind the aorta
        EXPECT_GT(s[3].centroid[1], s[1].centroid[1]);  // kidneys behind the liver
        // Plausible volumes within the field of view (mL).
        EXPECT_GT(s[1].voxels * ml, 800);
        EXPECT_LT(s[1].voxels * ml, 3000);
        EXPECT_GT(s[2].voxels * ml,
                  30);  // small spleens: the blob is clipped by ribs and diaphragm
        EXPECT_LT(s[2].voxels * ml, 600);
        for (int kidney : {3, 4}) {
            EXPECT_GT(s[kidney].voxels * ml, 60);
            EXPECT_LT(s[kidney].voxels * ml, 350);
        }
        EXPECT_GT(s[8].voxels * ml, 20);
        EXPECT_LT(s[8].voxels * ml, 200);
    }
}

TEST(CtPhantom, WrittenStudyLoadsOnTheLabelGrid) {
    TempDir dir;
    CtPhantomSpec spec = smallSpec(21);
    spec.size = {96, 80, 24};  // a cut through the liver and kidneys, quick to write
    const auto p = makeCtPhantom(spec);
    ASSERT_TRUE(p.isOk());
    PhantomWriteOptions w;
    w.image_nifti = true;
    auto files = writeCtPhantomStudy(*p, spec, dir / "study", w);
    ASSERT_TRUE(files.isOk()) << files.status().toString();
    auto scan = scanDicom({dir / "study/dicom"});
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    ASSERT_EQ(scan->series.size(), 1u);
    EXPECT_EQ(scan->series[0].modality, "CT");
    auto ct = loadSeries(scan->series[0]);
    ASSERT_TRUE(ct.isOk()) << ct.status().toString();
    auto labels = readImage(dir / "study/labels.nii.gz");
    auto image = readImage(dir / "study/image.nii.gz");
    ASSERT_TRUE(labels.isOk() && image.isOk());
    const Geometry g = p->hu.geometry();
    EXPECT_TRUE(ct->geometry().approxEqual(g, 1e-3, 1e-5, 1e-6));
    EXPECT_TRUE(labels->geometry().approxEqual(ct->geometry(), 1e-3, 1e-5, 1e-6));
    EXPECT_TRUE(image->geometry().approxEqual(ct->geometry(), 1e-3, 1e-5, 1e-6));
    ASSERT_EQ(labels->pixelType(), PixelType::kUInt8);
    const int64_t n = g.voxelCount();
    int64_t hu_diff = 0, label_diff = 0;
    visitPixels(*ct, [&](auto* v) {
        for (int64_t i = 0; i < n; ++i) hu_diff += v[i] != p->hu.data<int16_t>()[i];
    });
    for (int64_t i = 0; i < n; ++i)
        label_diff += labels->data<uint8_t>()[i] != p->labels.data<uint8_t>()[i];
    EXPECT_EQ(hu_diff, 0);  // HU through RescaleIntercept, exactly
    EXPECT_EQ(label_diff, 0);
    EXPECT_TRUE(std::filesystem::exists(dir / "study/phantom.json"));
}

// dciodvfy (dicom3tools) checks the CT Image IOD; skipped when it is not installed.
TEST(CtPhantom, DicomPassesDciodvfy) {
    if (!std::filesystem::exists("/usr/bin/dciodvfy")) GTEST_SKIP() << "dciodvfy not installed";
    TempDir dir;
    CtPhantomSpec spec = smallSpec(3);
    spec.size = {32, 32, 2};
    const auto p = makeCtPhantom(spec);
    ASSERT_TRUE(p.isOk());
    PhantomWriteOptions w;
    w.labels_nifti = w.description = false;
    ASSERT_TRUE(writeCtPhantomStudy(*p, spec, dir / "s", w).isOk());
    const std::string cmd = "/usr/bin/dciodvfy '" + (dir / "s/dicom/CT0001") + "' 2>&1";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, f)) out += buf;
    pclose(f);
    EXPECT_NE(out.find("CTImage"), std::string::npos) << out;
    EXPECT_EQ(out.find("Error"), std::string::npos) << out;
}

TEST(CtPhantom, BadSpecIsAnError) {
    CtPhantomSpec spec;
    spec.size = {0, 10, 10};
    EXPECT_EQ(makeCtPhantom(spec).status().code(), StatusCode::kInvalidArgument);
    spec.size = {10, 10, 10};
    spec.spacing = {1, -1, 1};
    EXPECT_EQ(makeCtPhantom(spec).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace voxseg::io
