// The separable spline resampler against ITK's 3D B-spline resampling (the oracle), on noise:
// every coefficient matters, unlike on smooth ramps.
#include "pipeline/spline_resample.h"

#include "pipeline/resample.h"
#include "test_volumes.h"

#include <gtest/gtest.h>
#include <itkBSplineInterpolateImageFunction.h>
#include <itkIdentityTransform.h>
#include <itkNearestNeighborInterpolateImageFunction.h>
#include <itkResampleImageFilter.h>

#include <cstring>
#include <random>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;

// Values are uniform in [-1, 1]; float recursions against ITK's double coefficients.
constexpr float kOracleTolerance = 2e-5f;

Volume noise(const Geometry& g, uint32_t seed) {
    Volume v = Volume::allocate<float>(g);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    float* p = v.data<float>();
    for (int64_t n = 0; n < g.voxelCount(); ++n) p[n] = u(rng);
    return v;
}

// ITK: 3D order-3 B-spline (double coefficients) or nearest neighbour onto `target`.
Volume itkResample(const Volume& v, const Geometry& target, bool spline) {
    using ImageT = Image3<float>;
    auto filter = itk::ResampleImageFilter<ImageT, ImageT, double, double>::New();
    filter->SetInput(v.image<float>());
    filter->SetTransform(itk::IdentityTransform<double, 3>::New());
    if (spline) {
        auto interp = itk::BSplineInterpolateImageFunction<ImageT, double, double>::New();
        interp->SetSplineOrder(3);
        filter->SetInterpolator(interp);
    } else {
        filter->SetInterpolator(
            itk::NearestNeighborInterpolateImageFunction<ImageT, double>::New());
    }
    auto reference = ImageT::New();
    reference->SetRegions(Volume::toItkRegion(target));
    Volume::applyGeometry(target, *reference);
    filter->SetUseReferenceImage(true);
    filter->SetReferenceImage(reference);
    filter->SetDefaultPixelValue(0);
    filter->Update();
    ImageT::Pointer out = filter->GetOutput();
    out->DisconnectPipeline();
    return Volume::fromImage<float>(out);
}

void expectClose(const Volume& mine, const Volume& oracle, float tolerance) {
    ASSERT_EQ(mine.geometry().size, oracle.geometry().size);
    const int64_t n = mine.geometry().voxelCount();
    float worst = 0.f;
    int64_t worst_at = 0;
    for (int64_t e = 0; e < n; ++e) {
        const float d = std::abs(mine.data<float>()[e] - oracle.data<float>()[e]);
        if (d > worst) worst = d, worst_at = e;
    }
    EXPECT_LE(worst, tolerance) << "largest difference at voxel " << worst_at << ": "
                                << mine.data<float>()[worst_at] << " vs "
                                << oracle.data<float>()[worst_at];
}

constexpr std::array<AxisInterpolation, 3> kAllSpline{
    AxisInterpolation::kSpline, AxisInterpolation::kSpline, AxisInterpolation::kSpline};

TEST(SplineResample, MatchesItkOnNoiseUpAndDownOnOddShapes) {
    const Mat3 oblique = {0.8, -0.6, 0, 0.6, 0.8, 0, 0, 0, 1};
    // Short axes (11, 10, 9 < ITK's 18-term horizon) use the exact mirror sum; 40 the horizon.
    // Not 2: ITK 5.2 reads outside the coefficients there (TwoSampleAxis below).
    for (const auto& [size, new_size] :
         {std::pair<std::array<int64_t, 3>, std::array<int64_t, 3>>{{11, 10, 9}, {23, 7, 13}},
          {{40, 33, 21}, {17, 50, 21}},
          {{40, 3, 9}, {29, 5, 13}}}) {
        const Geometry g = makeGeometry(size, {0.9, 1.3, 2.1}, {3, -4, 5}, oblique);
        const Volume v = noise(g, 7);
        const Geometry target = resampledGeometry(g, new_size);
        auto mine = splineResample(v, target, kAllSpline, 3);
        ASSERT_TRUE(mine.isOk()) << mine.status().toString();
        EXPECT_EQ(mine->geometry().origin, target.origin);
        SCOPED_TRACE(std::to_string(size[0]) + "x" + std::to_string(size[1]) + "x" +
                     std::to_string(size[2]));
        expectClose(*mine, itkResample(v, target, true), kOracleTolerance);
    }
}

TEST(SplineResample, NearestAxisMatchesItkTwoStepResampling) {
    // nnU-Net's separate z: order 3 in-plane at the original slices, then order 0 along z.
    const Geometry g = makeGeometry({24, 20, 7}, {0.7, 0.7, 5.0});
    const Volume v = noise(g, 11);
    const std::array<int64_t, 3> new_size{13, 31, 17};
    const Geometry target = resampledGeometry(g, new_size);
    const Geometry plane = resampledGeometry(g, {13, 31, 7});
    const Volume oracle = itkResample(itkResample(v, plane, true), target, false);
    auto mine = splineResample(
        v, target,
        {AxisInterpolation::kSpline, AxisInterpolation::kSpline, AxisInterpolation::kNearest}, 2);
    ASSERT_TRUE(mine.isOk()) << mine.status().toString();
    expectClose(*mine, oracle, kOracleTolerance);
}

TEST(SplineResample, TwoSampleAxisInterpolatesItsSamples) {
    // Regression: ITK's mirror boundary reads out of range on an axis of 2 samples (3.4e38 in
    // the comparison above); ours folds indices with period 2. Mirrored, (a, b) is the sequence
    // ...a b a b..., symmetric about 0.5: the spline passes through a and b and is (a + b) / 2
    // half way.
    const Geometry g = makeGeometry({2, 1, 1}, {2.0, 1.0, 1.0});
    Volume v = Volume::allocate<float>(g);
    v.data<float>()[0] = 3.f;
    v.data<float>()[1] = -1.f;
    const Geometry target = makeGeometry({3, 1, 1}, {1.0, 1.0, 1.0});
    auto r = splineResample(v, target, kAllSpline);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_NEAR(r->data<float>()[0], 3.f, kOracleTolerance);
    EXPECT_NEAR(r->data<float>()[1], 1.f, kOracleTolerance);
    EXPECT_NEAR(r->data<float>()[2], -1.f, kOracleTolerance);
}

TEST(SplineResample, PositionsOutsideTheInputAreZeroAsInItk) {
    const Geometry g = makeGeometry({12, 12, 12}, {1, 1, 1});
    const Volume v = noise(g, 3);
    // A grid shifted by 5 mm and finer: part of it lies outside the input.
    Geometry target = makeGeometry({20, 9, 14}, {0.8, 1.1, 1.0}, {5.0, -2.0, 1.5});
    auto mine = splineResample(v, target, kAllSpline, 1);
    ASSERT_TRUE(mine.isOk());
    const Volume oracle = itkResample(v, target, true);
    expectClose(*mine, oracle, kOracleTolerance);
    int zeros = 0;
    for (int64_t e = 0; e < target.voxelCount(); ++e) zeros += oracle.data<float>()[e] == 0.f;
    EXPECT_GT(zeros, 100);  // the test covers the outside
}

TEST(SplineResample, ThreadCountDoesNotChangeTheResult) {
    const Geometry g = makeGeometry({37, 29, 23}, {1.0, 1.0, 1.0});
    const Volume v = noise(g, 5);
    const Geometry target = resampledGeometry(g, {19, 41, 11});
    auto one = splineResample(v, target, kAllSpline, 1);
    auto three = splineResample(v, target, kAllSpline, 3);
    ASSERT_TRUE(one.isOk() && three.isOk());
    EXPECT_EQ(std::memcmp(one->data<float>(), three->data<float>(),
                          sizeof(float) * static_cast<size_t>(target.voxelCount())),
              0);
}

TEST(SplineResample, UnchangedGridIsCopiedAndBadInputsAreRefused) {
    const Geometry g = makeGeometry({9, 8, 7}, {1, 2, 3});
    const Volume v = noise(g, 9);
    auto same = splineResample(v, g, kAllSpline);
    ASSERT_TRUE(same.isOk());
    EXPECT_EQ(std::memcmp(same->data<float>(), v.data<float>(), sizeof(float) * g.voxelCount()), 0);

    Geometry rotated = g;
    rotated.direction = {0, 1, 0, -1, 0, 0, 0, 0, 1};
    EXPECT_FALSE(splineResample(v, rotated, kAllSpline).isOk());
    const Volume shorts = Volume::allocate<int16_t>(g);
    EXPECT_FALSE(splineResample(shorts, g, kAllSpline).isOk());
}

}  // namespace
}  // namespace voxseg::pipeline
