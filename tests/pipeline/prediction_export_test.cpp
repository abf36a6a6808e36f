#include "pipeline/prediction_export.h"
#include "pipeline/preprocess.h"
#include "pipeline/resample.h"

#include "test_volumes.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <itkLinearInterpolateImageFunction.h>
#include <itkResampleImageFilter.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;
using voxseg::testing::valueAt;

constexpr double kInterpolationTolerance = 1e-4;
constexpr double kMinDice = 0.95;

double dice(const Volume& a, const Volume& b, uint8_t label) {
    int64_t inter = 0, na = 0, nb = 0;
    for (int64_t n = 0; n < a.geometry().voxelCount(); ++n) {
        const bool x = a.data<uint8_t>()[n] == label, y = b.data<uint8_t>()[n] == label;
        inter += x && y, na += x, nb += y;
    }
    return na + nb == 0 ? 1.0 : 2.0 * inter / (na + nb);
}

// Sphere of radius 6 mm at an off-centre point: any flip or permutation error moves it.
const Vec3 kCentre{14.0, -3.0, 21.0};
double sphere(const Vec3& p) { return voxseg::testing::distance(p, kCentre) < 6.0 ? 1.0 : 0.0; }

TEST(PredictionExport, ScoresBackOnTheOriginalGridThroughOrientationCropAndSpacing) {
    // An LPS input, a RAS model at a coarser, anisotropic spacing (zyx), cropping on.
    const Geometry g = makeGeometry({40, 36, 30}, {0.8, 0.9, 1.1}, {0, -20, 5});
    Volume image = makeVolume<int16_t>(g, [](const Vec3& p) { return 100 * sphere(p) + 10; });
    // Zero a margin so cropping has something to do.
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < 3; ++i) image.data<int16_t>()[(k * 36 + j) * 40 + i] = 0;
    const Volume truth = makeVolume<uint8_t>(g, sphere);

    PreprocessSpec spec;
    spec.orientation = "RAS";
    spec.axis_order = AxisOrder::kZyx;
    spec.spacing_mm = {1.5, 1.2, 1.0};  // z, y, x
    spec.channels = {Normalization{}};
    auto pre = preprocess({image}, spec);
    ASSERT_TRUE(pre.isOk()) << pre.status().toString();
    const PreprocessRecord& rec = pre->record;
    EXPECT_EQ(rec.crop.begin[0], 0);  // RAS flips i: the zeroed margin is at the end
    EXPECT_EQ(rec.crop.size[0], 37);
    EXPECT_EQ(rec.oriented.orientationCode(), "RAS");
    EXPECT_NEAR(rec.network.spacing[2], 1.5, 0.05);

    // Fake network: background score = 55 - x, foreground = x - 55 (x = input intensity).
    const engine::Tensor& in = pre->input;
    engine::Tensor scores(engine::DType::kFloat32, {2, in.dim(1), in.dim(2), in.dim(3)});
    const int64_t n = in.numel();
    for (int64_t e = 0; e < n; ++e) {
        scores.data<float>()[e] = 55.0f - in.data<float>()[e];
        scores.data<float>()[n + e] = in.data<float>()[e] - 55.0f;
    }
    auto labels = scoresToLabelMap(scores, rec, ExportSpec{});
    ASSERT_TRUE(labels.isOk()) << labels.status().toString();
    EXPECT_EQ(labels->pixelType(), PixelType::kUInt8);
    // Exactly the input geometry.
    const Geometry out = labels->geometry();
    EXPECT_EQ(out.size, g.size);
    EXPECT_EQ(out.origin, g.origin);
    EXPECT_EQ(out.spacing, g.spacing);
    EXPECT_EQ(out.direction, g.direction);
    EXPECT_GE(dice(*labels, truth, 1), kMinDice);
    const Vec3 c = g.physicalToIndex(kCentre);
    EXPECT_EQ(valueAt<uint8_t>(*labels, std::lround(c[0]), std::lround(c[1]), std::lround(c[2])),
              1);

    // The same scores kept in fp16 (the sliding window's default accumulator): the two channels
    // are exact negatives, so rounding never changes which one is larger: identical labels.
    engine::Tensor half(engine::DType::kFloat16, scores.shape());
    for (int64_t e = 0; e < scores.numel(); ++e)
        half.data<uint16_t>()[e] = engine::floatToHalf(scores.data<float>()[e]);
    auto half_labels = scoresToLabelMap(half, rec, ExportSpec{});
    ASSERT_TRUE(half_labels.isOk()) << half_labels.status().toString();
    EXPECT_EQ(half_labels->geometry().size, g.size);
    EXPECT_EQ(std::memcmp(half_labels->data<uint8_t>(), labels->data<uint8_t>(),
                          static_cast<size_t>(g.voxelCount())),
              0);

    // Sigmoid with one channel per label, and label values from the model.
    ExportSpec sig;
    sig.activation = OutputActivation::kSigmoid;
    sig.channel_labels = {300};
    sig.threshold = 0.0;  // logits
    engine::Tensor fg(engine::DType::kFloat32, {1, in.dim(1), in.dim(2), in.dim(3)});
    std::memcpy(fg.data<float>(), scores.data<float>() + n, sizeof(float) * n);
    auto multi = scoresToLabelMap(fg, rec, sig);
    ASSERT_TRUE(multi.isOk());
    EXPECT_EQ(multi->pixelType(), PixelType::kUInt16);
    EXPECT_EQ(valueAt<uint16_t>(*multi, std::lround(c[0]), std::lround(c[1]), std::lround(c[2])),
              300);

    engine::Tensor wrong(engine::DType::kFloat32, {2, 3, 3, 3});
    EXPECT_FALSE(scoresToLabelMap(wrong, rec, ExportSpec{}).isOk());
    engine::Tensor ints(engine::DType::kInt32, scores.shape());
    auto refused = scoresToLabelMap(ints, rec, ExportSpec{});
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("float16"), std::string::npos);
}

// Softmax export skips the interpolation where all 8 network neighbours agree on the winning
// channel; it must give the label map that interpolating every voxel gives, on smooth
// multi-channel scores with many borders, up- and down-sampled, in fp32 and fp16, both axis
// orders and with nnU-Net's nearest (separate) axis.
TEST(PredictionExport, SkippingAgreeingVoxelsGivesTheFullyInterpolatedLabels) {
    struct Grid {
        std::array<int64_t, 3> net, out;
        Vec3 spacing;
        AxisOrder order;
    };
    for (const Grid& grid : {Grid{{19, 17, 13}, {41, 30, 27}, {2.0, 2.0, 2.0}, AxisOrder::kZyx},
                             Grid{{23, 21, 9}, {17, 40, 31}, {1.0, 1.0, 4.0}, AxisOrder::kXyz}}) {
        PreprocessRecord rec;
        rec.network = makeGeometry(grid.net, grid.spacing);
        rec.cropped = resampledGeometry(rec.network, grid.out);
        rec.oriented = rec.original = rec.cropped;
        rec.crop.size = rec.cropped.size;
        rec.axis_order = grid.order;
        // 7 channels of overlapping smooth bumps plus noise: thousands of label borders.
        constexpr int kChannels = 7;
        std::mt19937 rng(9);
        std::uniform_real_distribution<double> pos(0.0, 1.0), noise(-0.05, 0.05);
        std::vector<Volume> channels;
        for (int c = 0; c < kChannels; ++c) {
            Vec3 centre;
            for (int a = 0; a < 3; ++a)
                centre[a] = pos(rng) * static_cast<double>(grid.net[a]) * grid.spacing[a];
            channels.push_back(makeVolume<float>(rec.network, [&](const Vec3& p) {
                return std::cos(0.4 * voxseg::testing::distance(p, centre)) + noise(rng);
            }));
        }
        auto scores = volumesToTensor(channels, grid.order);
        ASSERT_TRUE(scores.isOk());
        engine::Tensor half(engine::DType::kFloat16, scores->shape());
        for (int64_t e = 0; e < scores->numel(); ++e)
            half.data<uint16_t>()[e] = engine::floatToHalf(scores->data<float>()[e]);
        ExportSpec full;
        full.interpolate_everywhere = true;
        for (const engine::Tensor* t : {&*scores, &half}) {
            auto fast = scoresToLabelMap(*t, rec, ExportSpec{});
            auto slow = scoresToLabelMap(*t, rec, full);
            ASSERT_TRUE(fast.isOk() && slow.isOk());
            const int64_t n = rec.cropped.voxelCount();
            int64_t differ = 0;
            std::set<int> seen;
            for (int64_t e = 0; e < n; ++e) {
                differ += fast->data<uint8_t>()[e] != slow->data<uint8_t>()[e];
                seen.insert(fast->data<uint8_t>()[e]);
            }
            EXPECT_EQ(differ, 0) << "of " << n << " voxels";
            EXPECT_GE(seen.size(), 5u);  // the test has borders to get wrong
        }
    }
}

// The fused interpolation equals ITK's linear resampler (the oracle) on the same grids.
TEST(PredictionExport, InterpolationMatchesItkLinearResampling) {
    PreprocessRecord rec;
    rec.network = makeGeometry({9, 7, 6}, {2.0, 2.5, 3.0}, {1, 2, 3});
    rec.cropped = resampledGeometry(rec.network, {17, 11, 15});
    rec.oriented = rec.cropped;
    rec.original = rec.cropped;
    rec.crop.size = rec.cropped.size;
    rec.axis_order = AxisOrder::kZyx;
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    Volume net = Volume::allocate<float>(rec.network);
    for (int64_t e = 0; e < rec.network.voxelCount(); ++e) net.data<float>()[e] = uni(rng);
    auto tensor = volumesToTensor({net}, AxisOrder::kZyx);
    ASSERT_TRUE(tensor.isOk());
    auto mine = scoreChannelToOriginal(*tensor, 0, rec);
    ASSERT_TRUE(mine.isOk());
    // fp16 scores: the same interpolation of the rounded values (fp16 step 2^-11 near 1).
    engine::Tensor half(engine::DType::kFloat16, tensor->shape());
    for (int64_t e = 0; e < tensor->numel(); ++e)
        half.data<uint16_t>()[e] = engine::floatToHalf(tensor->data<float>()[e]);
    auto mine_half = scoreChannelToOriginal(half, 0, rec);
    ASSERT_TRUE(mine_half.isOk()) << mine_half.status().toString();
    for (int64_t e = 0; e < rec.cropped.voxelCount(); ++e)
        ASSERT_NEAR(mine_half->data<float>()[e], mine->data<float>()[e], 0x1p-10) << e;

    using F = Image3<float>;
    auto resample = itk::ResampleImageFilter<F, F>::New();
    resample->SetInput(net.image<float>());
    resample->SetInterpolator(itk::LinearInterpolateImageFunction<F, double>::New());
    auto ref = F::New();
    ref->SetRegions(Volume::toItkRegion(rec.cropped));
    Volume::applyGeometry(rec.cropped, *ref);
    resample->SetUseReferenceImage(true);
    resample->SetReferenceImage(ref);
    resample->Update();
    const float* oracle = resample->GetOutput()->GetBufferPointer();
    int compared = 0;
    for (int64_t k = 0; k < rec.cropped.size[2]; ++k)
        for (int64_t j = 0; j < rec.cropped.size[1]; ++j)
            for (int64_t i = 0; i < rec.cropped.size[0]; ++i) {
                // ITK treats points beyond the outer voxel centres as outside; compare inside.
                const Vec3 q = rec.network.physicalToIndex(rec.cropped.indexToPhysical(
                    {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)}));
                bool inside = true;
                for (int a = 0; a < 3; ++a) inside &= q[a] >= 0 && q[a] <= rec.network.size[a] - 1;
                if (!inside) continue;
                const int64_t e = (k * rec.cropped.size[1] + j) * rec.cropped.size[0] + i;
                ASSERT_NEAR(mine->data<float>()[e], oracle[e], kInterpolationTolerance)
                    << i << "," << j << "," << k;
                ++compared;
            }
    EXPECT_GT(compared, 1000);
}

// nnU-Net 2.5.1's export of float16 logits (resample_data_or_seg_to_shape into float16, softmax,
// argmax; tests/pipeline/data/gen_nnunet_export_golden.py) against round_to_half: the same label
// at every voxel. Without the rounding the float32 export differs (the golden's channels are
// within a float16 step of each other at many voxels).
TEST(PredictionExport, HalfRoundingIsNnUNetsFloat16Export) {
    const std::filesystem::path dir =
        std::filesystem::path(VOXSEG_SOURCE_DIR) / "tests/pipeline/data/nnunet_export";
    std::ifstream f(dir / "index.json");
    ASSERT_TRUE(f.good()) << "run tests/pipeline/data/gen_nnunet_export_golden.py";
    const auto index = nlohmann::json::parse(f);
    ASSERT_GE(index["cases"].size(), 3u);
    for (const auto& c : index["cases"]) {
        const std::string name = c["name"];
        SCOPED_TRACE(name);
        const auto zyx = [](const nlohmann::json& v) {  // nnU-Net's (z, y, x) -> voxseg's (i, j, k)
            return std::array<double, 3>{v[2].get<double>(), v[1].get<double>(),
                                         v[0].get<double>()};
        };
        const auto size_of = [&](const nlohmann::json& v) {
            const auto d = zyx(v);
            return std::array<int64_t, 3>{static_cast<int64_t>(d[0]), static_cast<int64_t>(d[1]),
                                          static_cast<int64_t>(d[2])};
        };
        const auto s = zyx(c["spacing"]), ns = zyx(c["network_spacing"]);
        const Geometry out = makeGeometry(size_of(c["shape"]), {s[0], s[1], s[2]});
        const Geometry net = makeGeometry(size_of(c["network_shape"]), {ns[0], ns[1], ns[2]});
        const int64_t k = c["channels"].get<int64_t>();
        engine::Tensor scores(engine::DType::kFloat16, {k, net.size[2], net.size[1], net.size[0]});
        std::ifstream logits(dir / (name + ".logits.u16"), std::ios::binary);
        logits.read(static_cast<char*>(scores.raw()), static_cast<std::streamsize>(scores.bytes()));
        ASSERT_EQ(static_cast<size_t>(logits.gcount()), scores.bytes());
        std::vector<uint8_t> expected(static_cast<size_t>(out.voxelCount()));
        std::ifstream labels(dir / (name + ".labels.u8"), std::ios::binary);
        labels.read(reinterpret_cast<char*>(expected.data()),
                    static_cast<std::streamsize>(expected.size()));
        ASSERT_EQ(static_cast<size_t>(labels.gcount()), expected.size());

        PreprocessRecord record;
        record.original = record.oriented = record.cropped = out;
        record.crop.size = out.size;
        record.network = net;
        record.axis_order = AxisOrder::kZyx;
        ExportSpec spec;
        spec.round_to_half = true;
        auto got = scoresToLabelMap(scores, record, spec);
        ASSERT_TRUE(got.isOk()) << got.status().toString();
        int64_t differ = 0;
        for (size_t v = 0; v < expected.size(); ++v)
            differ += got->data<uint8_t>()[v] != expected[v];
        EXPECT_EQ(differ, 0) << "of " << expected.size() << " voxels";
        spec.round_to_half = false;
        auto plain = scoresToLabelMap(scores, record, spec);
        ASSERT_TRUE(plain.isOk());
        int64_t plain_differ = 0;
        for (size_t v = 0; v < expected.size(); ++v)
            plain_differ += plain->data<uint8_t>()[v] != expected[v];
        EXPECT_GT(plain_differ, 0) << "the golden cannot tell the exports apart";
        std::printf("%s: %lld voxels differ with float16 rounding, %lld without\n", name.c_str(),
                    static_cast<long long>(differ), static_cast<long long>(plain_differ));
    }
}

}  // namespace
}  // namespace voxseg::pipeline
