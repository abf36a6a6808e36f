// Sliding-window inference: grid and Gaussian against nnU-Net/MONAI goldens, and the whole loop
// with small hand-written networks (Backend/CompiledGraph implementations in this file) whose
// exact answers are known.
#include "engine/inference/sliding_window.h"

#include "core/memory_limit.h"
#include "engine/inference/sliding_window_nnunet.h"

#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <random>

namespace voxseg::engine {
namespace {

// Goldens are float32 from the reference frameworks; voxseg computes the map in double and
// rounds once, so they agree to float rounding.
constexpr float kMapTolerance = 2e-6f;
// Sums of a few dozen float32 products: relative rounding only.
constexpr float kSumTolerance = 1e-5f;

nlohmann::json loadGolden(const std::string& name) {
    std::ifstream in(std::string(VOXSEG_SOURCE_DIR) + "/tests/engine/data/sliding_window/" + name);
    EXPECT_TRUE(in.good()) << "missing golden " << name
                           << ": run tools/gen_sliding_window_golden.py";
    return nlohmann::json::parse(in);
}

TEST(WindowStarts, MatchNnUNetComputeSteps) {
    const auto golden = loadGolden("grid_gaussian.json");
    ASSERT_GE(golden["steps"].size(), 8u);
    for (const auto& c : golden["steps"]) {
        const auto image = c["image"].get<std::vector<int64_t>>();
        const auto patch = c["patch"].get<std::vector<int64_t>>();
        const double overlap = c["overlap"].get<double>();
        for (size_t a = 0; a < image.size(); ++a) {
            EXPECT_EQ(windowStarts(image[a], patch[a], overlap, WindowConvention::kNnUNet),
                      c["nnunet"][a].get<std::vector<int64_t>>())
                << "image " << image[a] << " patch " << patch[a] << " overlap " << overlap;
        }
    }
}

TEST(WindowStarts, MatchMonaiDensePatchSlices) {
    const auto golden = loadGolden("grid_gaussian.json");
    for (const auto& c : golden["steps"]) {
        const auto image = c["image"].get<std::vector<int64_t>>();
        const auto patch = c["patch"].get<std::vector<int64_t>>();
        const double overlap = c["overlap"].get<double>();
        for (size_t a = 0; a < image.size(); ++a) {
            EXPECT_EQ(windowStarts(image[a], patch[a], overlap, WindowConvention::kMonai),
                      c["monai"][a].get<std::vector<int64_t>>())
                << "image " << image[a] << " patch " << patch[a] << " overlap " << overlap;
        }
    }
}

TEST(WindowStarts, CoverTheAxisAndEndAtTheBorder) {
    for (auto convention : {WindowConvention::kNnUNet, WindowConvention::kMonai}) {
        for (int64_t image = 5; image < 90; image += 7) {
            for (int64_t patch : {1, 3, 5}) {
                for (double overlap : {0.0, 0.25, 0.5, 0.9}) {
                    const auto s = windowStarts(image, patch, overlap, convention);
                    ASSERT_FALSE(s.empty());
                    EXPECT_EQ(s.front(), 0);
                    EXPECT_EQ(s.back(), image - patch);
                    for (size_t i = 1; i < s.size(); ++i) {
                        // nnU-Net repeats a start when the step is below one voxel (patch 1,
                        // overlap 0.9); kept, since it changes the weighting nnU-Net gives.
                        if (convention == WindowConvention::kMonai || patch * (1 - overlap) >= 1)
                            EXPECT_GT(s[i], s[i - 1]);
                        EXPECT_GE(s[i], s[i - 1]);
                        EXPECT_LE(s[i] - s[i - 1], patch) << "gap between windows";
                    }
                }
            }
        }
    }
}

TEST(ImportanceMap, MatchesNnUNetAndMonaiGaussians) {
    const auto golden = loadGolden("grid_gaussian.json");
    ASSERT_GE(golden["maps"].size(), 4u);
    for (const auto& c : golden["maps"]) {
        const auto patch = c["patch"].get<std::vector<int64_t>>();
        const double sigma = c["sigma_scale"].get<double>();
        for (auto [convention, key] : {std::pair{WindowConvention::kNnUNet, "nnunet"},
                                       std::pair{WindowConvention::kMonai, "monai"}}) {
            const auto expected = c[key].get<std::vector<float>>();
            const auto map = importanceMap(patch, sigma, convention);
            ASSERT_EQ(map.size(), expected.size());
            float worst = 0.0f;
            for (size_t i = 0; i < map.size(); ++i)
                worst = std::max(worst, std::abs(map[i] - expected[i]));
            EXPECT_LE(worst, kMapTolerance)
                << key << " patch " << shapeToString(patch) << " sigma_scale " << sigma;
        }
    }
}

// ---- Hand-written networks ------------------------------------------------------------------

// A CompiledGraph computing `fn(input patch batch) -> output batch` on the host, counting runs.
class FnCompiled : public CompiledGraph {
  public:
    using Fn = std::function<void(const Tensor& in, Tensor& out)>;
    FnCompiled(Shape in, Shape out, Fn fn, int* runs = nullptr)
        : in_{std::move(in)}, out_{std::move(out)}, fn_(std::move(fn)), runs_(runs) {}
    const std::vector<Shape>& inputShapes() const override { return in_; }
    const std::vector<Shape>& outputShapes() const override { return out_; }
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
        if (inputs.size() != 1 || inputs[0].shape() != in_[0])
            return internalError("fake network got the wrong input shape");
        outputs.resize(1);
        if (outputs[0].shape() != out_[0]) outputs[0] = Tensor(DType::kFloat32, out_[0]);
        fn_(inputs[0], outputs[0]);
        if (runs_) ++*runs_;
        return Status::ok();
    }
    size_t workspaceBytes() const override { return 0; }
    std::string describe() const override { return "test network"; }

  private:
    std::vector<Shape> in_, out_;
    Fn fn_;
    int* runs_;
};

Shape withBatch(int64_t batch, int64_t channels, const std::vector<int64_t>& spatial) {
    Shape s = {batch, channels};
    s.insert(s.end(), spatial.begin(), spatial.end());
    return s;
}

// Pointwise (1x1x1) convolution y = W x + b: translation- and flip-equivariant, so sliding-window
// inference must reproduce it exactly on the whole image whatever the grid and weights.
void pointwiseConv(const Tensor& in, Tensor& out, const std::vector<float>& w,
                   const std::vector<float>& b) {
    const int64_t batch = in.dim(0), c_in = in.dim(1), c_out = out.dim(1);
    const int64_t voxels = in.numel() / (batch * c_in);
    for (int64_t n = 0; n < batch; ++n)
        for (int64_t k = 0; k < c_out; ++k) {
            float* o = out.data<float>() + (n * c_out + k) * voxels;
            for (int64_t v = 0; v < voxels; ++v) {
                float acc = b[k];
                for (int64_t c = 0; c < c_in; ++c)
                    acc += w[k * c_in + c] * in.data<float>()[(n * c_in + c) * voxels + v];
                o[v] = acc;
            }
        }
}

// A Backend whose only "op" is the graph's single 1x1x1 Conv, read from the Graph's constants:
// exercises SlidingWindow::create(Backend&, Graph&) before the real backends exist.
class PointwiseBackend : public Backend {
  public:
    std::string name() const override { return "test-pointwise"; }
    std::string deviceDescription() const override { return "host"; }
    bool supportsPrecision(Precision p) const override { return p == Precision::kFloat32; }
    Result<std::unique_ptr<CompiledGraph>> compile(const Graph& graph,
                                                   const std::vector<Shape>& input_shapes,
                                                   const CompileOptions&) override {
        if (graph.nodes.size() != 1 || graph.nodes[0].op != OpKind::kConv)
            return unsupported("test backend runs one 1x1x1 Conv");
        const Node& conv = graph.nodes[0];
        const Tensor& w = graph.constant(conv.inputs[1]);
        const Tensor& b = graph.constant(conv.inputs[2]);
        Shape out = input_shapes[0];
        out[1] = w.dim(0);
        auto wv = w.toFloats(), bv = b.toFloats();
        return std::unique_ptr<CompiledGraph>(new FnCompiled(
            input_shapes[0], out,
            [wv, bv](const Tensor& in, Tensor& o) { pointwiseConv(in, o, wv, bv); }));
    }
};

Graph pointwiseGraph(int64_t c_in, int64_t c_out, const std::vector<float>& w,
                     const std::vector<float>& b) {
    Graph g;
    const ValueId x = g.addValue({"x", {1, c_in, 1, 1, 1}, DType::kFloat32, std::nullopt});
    const ValueId wi = g.addValue({"w",
                                   {c_out, c_in, 1, 1, 1},
                                   DType::kFloat32,
                                   Tensor::fromFloats({c_out, c_in, 1, 1, 1}, w)});
    const ValueId bi = g.addValue({"b", {c_out}, DType::kFloat32, Tensor::fromFloats({c_out}, b)});
    const ValueId y = g.addValue({"y", {1, c_out, 1, 1, 1}, DType::kFloat32, std::nullopt});
    Node n;
    n.op = OpKind::kConv;
    n.name = "conv";
    n.inputs = {x, wi, bi};
    n.outputs = {y};
    n.conv.kernel = {1, 1, 1};
    n.conv.in_channels = c_in;
    n.conv.out_channels = c_out;
    n.conv.has_bias = true;
    g.nodes.push_back(n);
    g.inputs = {x};
    g.outputs = {y};
    return g;
}

Tensor randomImage(Shape shape, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    Tensor t(DType::kFloat32, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    return t;
}

float maxAbsDiff(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    if (a.shape() != b.shape()) return INFINITY;
    float worst = 0.0f;
    for (int64_t i = 0; i < a.numel(); ++i)
        worst = std::max(worst, std::abs(a.data<float>()[i] - b.data<float>()[i]));
    return worst;
}

struct PointwiseCase {
    Shape image;  // C, spatial...
    std::vector<int64_t> patch;
    double overlap;
    int batch;
    std::vector<int> mirror_axes;
    WindowConvention convention;
};

TEST(SlidingWindow, PointwiseNetworkReproducesWholeImageResult) {
    const std::vector<float> w = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};  // 3 out x 2 in
    const std::vector<float> b = {0.1f, -0.2f, 0.3f};
    PointwiseBackend backend;
    const Graph graph = pointwiseGraph(2, 3, w, b);
    const std::vector<PointwiseCase> cases = {
        {{2, 23, 17, 30}, {8, 8, 8}, 0.5, 1, {}, WindowConvention::kNnUNet},
        {{2, 23, 17, 30}, {8, 6, 10}, 0.25, 3, {0, 2}, WindowConvention::kNnUNet},
        {{2, 23, 17, 30}, {8, 6, 10}, 0.5, 4, {}, WindowConvention::kMonai},
        // Smaller than the patch along two axes: padded, then cropped back.
        {{2, 5, 17, 3}, {8, 8, 8}, 0.5, 2, {1}, WindowConvention::kNnUNet},
        {{2, 5, 4, 3}, {8, 8, 8}, 0.5, 1, {}, WindowConvention::kMonai},
        // 2D.
        {{2, 31, 20}, {16, 16}, 0.5, 2, {0, 1}, WindowConvention::kNnUNet},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE("image " + shapeToString(c.image) + " patch " + shapeToString(c.patch));
        const Tensor image = randomImage(c.image, 7);
        SlidingWindowOptions o;
        o.patch_size = c.patch;
        o.overlap = c.overlap;
        o.batch = c.batch;
        o.mirror_axes = c.mirror_axes;
        o.convention = c.convention;
        SlidingWindowStats stats;
        auto result = slidingWindowInference(backend, graph, image, o, {}, &stats);
        ASSERT_TRUE(result.isOk()) << result.status().toString();
        Shape whole_out = c.image;
        whole_out[0] = 3;
        Tensor expected(DType::kFloat32, whole_out);
        Tensor exp_flat = expected.reshaped(withBatch(1, 3, {expected.numel() / 3}));
        pointwiseConv(image.reshaped(withBatch(1, 2, {image.numel() / 2})), exp_flat, w, b);
        EXPECT_LE(maxAbsDiff(*result, expected), kSumTolerance * 8);
        int64_t grid = 1;
        for (int64_t g : stats.grid) grid *= g;
        EXPECT_EQ(stats.patches, grid);
        const int64_t items = grid << c.mirror_axes.size();
        EXPECT_EQ(stats.forward_passes, (items + c.batch - 1) / c.batch);
        EXPECT_EQ(stats.padded_items, stats.forward_passes * c.batch - items);
        int64_t padded_voxels = 1;
        for (size_t a = 0; a < c.patch.size(); ++a)
            padded_voxels *= std::max(c.image[a + 1], c.patch[a]);
        EXPECT_EQ(stats.accumulator_bytes, static_cast<size_t>(4 * 4 * padded_voxels));
        EXPECT_EQ(stats.patch_buffer_bytes,
                  static_cast<size_t>(c.batch * (2 + 3) * numel(c.patch) * 4));
    }
}

// Output channel 0 = the voxel's x position inside its patch, channel 1 = 1: the result is the
// weighted mean of local positions, a 1D sum that the test computes on its own from the starts
// and the 1D Gaussian (the importance map is an outer product; the y/z factors cancel).
void positionNet(const Tensor& in, Tensor& out) {
    const int64_t batch = in.dim(0), pz = in.dim(2), py = in.dim(3), px = in.dim(4);
    for (int64_t n = 0; n < batch; ++n)
        for (int64_t z = 0; z < pz; ++z)
            for (int64_t y = 0; y < py; ++y)
                for (int64_t x = 0; x < px; ++x) {
                    const int64_t v = (z * py + y) * px + x;
                    out.data<float>()[(n * 2 + 0) * pz * py * px + v] = static_cast<float>(x);
                    out.data<float>()[(n * 2 + 1) * pz * py * px + v] = 1.0f;
                }
}

TEST(SlidingWindow, WeightedAverageOfPositionsMatchesIndependentSum) {
    // Unit z/y extents keep MONAI's 1e-3 floor out of play (it would break separability).
    const std::vector<int64_t> patch = {1, 1, 12};
    const int64_t width = 41;
    for (auto convention : {WindowConvention::kNnUNet, WindowConvention::kMonai}) {
        SlidingWindowOptions o;
        o.patch_size = patch;
        o.overlap = 0.5;
        o.batch = 2;
        o.convention = convention;
        auto sw =
            SlidingWindow::create(std::make_unique<FnCompiled>(withBatch(2, 1, patch),
                                                               withBatch(2, 2, patch), positionNet),
                                  o);
        ASSERT_TRUE(sw.isOk()) << sw.status().toString();
        auto result = (*sw)->run(randomImage({1, 6, 9, width}, 3));
        ASSERT_TRUE(result.isOk()) << result.status().toString();
        // Independent 1D computation along x.
        const double sigma = 0.125 * 12;
        const double center = convention == WindowConvention::kNnUNet ? 6.0 : 5.5;
        const auto starts = windowStarts(width, 12, 0.5, convention);
        for (int64_t x = 0; x < width; ++x) {
            double num = 0, den = 0;
            for (int64_t s : starts) {
                if (x < s || x >= s + 12) continue;
                const double g =
                    std::exp(-0.5 * (x - s - center) * (x - s - center) / (sigma * sigma));
                num += g * static_cast<double>(x - s);
                den += g;
            }
            const float* r = result->data<float>();
            for (int64_t zy = 0; zy < 6 * 9; ++zy) {
                ASSERT_NEAR(r[zy * width + x], num / den, kSumTolerance * 12)
                    << windowConventionName(convention) << " x " << x;
                ASSERT_NEAR(r[6 * 9 * width + zy * width + x], 1.0f, kSumTolerance);
            }
        }
    }
}

// One Gaussian-weighted window covering the whole image (deepbet's fixed-shape stages): the
// result is the network's output itself, bit for bit (handed through, not w * p / w), with the
// same shape as from the accumulators.
TEST(SlidingWindow, SingleWholeImageWindowIsTheNetworkOutputExactly) {
    const std::vector<int64_t> patch = {5, 6, 7};
    SlidingWindowOptions o;
    o.patch_size = patch;
    o.gaussian = true;
    auto sw = SlidingWindow::create(
        std::make_unique<FnCompiled>(withBatch(1, 1, patch), withBatch(1, 2, patch), positionNet),
        o);
    ASSERT_TRUE(sw.isOk()) << sw.status().toString();
    const Tensor image = randomImage({1, 5, 6, 7}, 5);
    SlidingWindowStats stats;
    auto result = (*sw)->run(image, {}, &stats);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    EXPECT_EQ(stats.patches, 1);
    ASSERT_EQ(result->shape(), (Shape{2, 5, 6, 7}));
    Tensor want(DType::kFloat32, withBatch(1, 2, patch));
    positionNet(image.reshaped(withBatch(1, 1, patch)), want);
    for (int64_t v = 0; v < want.numel(); ++v)
        ASSERT_EQ(result->data<float>()[v], want.data<float>()[v]) << "voxel " << v;
}

TEST(SlidingWindow, MirroringAveragesFlippedPredictions) {
    // positionNet ignores its input, so flipping x and flipping back turns x into (px-1-x): the
    // mirrored mean is (px - 1) / 2 everywhere, a value no unmirrored run produces.
    const std::vector<int64_t> patch = {4, 4, 8};
    SlidingWindowOptions o;
    o.patch_size = patch;
    o.batch = 4;
    o.mirror_axes = {0, 2};
    auto sw = SlidingWindow::create(
        std::make_unique<FnCompiled>(withBatch(4, 1, patch), withBatch(4, 2, patch), positionNet),
        o);
    ASSERT_TRUE(sw.isOk());
    auto result = (*sw)->run(randomImage({1, 9, 7, 19}, 5));
    ASSERT_TRUE(result.isOk());
    for (int64_t v = 0; v < 9 * 7 * 19; ++v)
        ASSERT_NEAR(result->data<float>()[v], 3.5f, kSumTolerance * 8) << "voxel " << v;
}

// 3x3x3 mean filter with zero padding inside each patch: flip-equivariant but not pointwise, so
// patch borders show; mirroring must not change the result.
void boxFilter(const Tensor& in, Tensor& out) {
    const int64_t batch = in.dim(0), d = in.dim(2), h = in.dim(3), w = in.dim(4);
    for (int64_t n = 0; n < batch; ++n)
        for (int64_t z = 0; z < d; ++z)
            for (int64_t y = 0; y < h; ++y)
                for (int64_t x = 0; x < w; ++x) {
                    float acc = 0.0f;
                    for (int64_t dz = -1; dz <= 1; ++dz)
                        for (int64_t dy = -1; dy <= 1; ++dy)
                            for (int64_t dx = -1; dx <= 1; ++dx) {
                                const int64_t zz = z + dz, yy = y + dy, xx = x + dx;
                                if (zz < 0 || zz >= d || yy < 0 || yy >= h || xx < 0 || xx >= w)
                                    continue;
                                acc += in.data<float>()[((n * d + zz) * h + yy) * w + xx];
                            }
                    out.data<float>()[((n * d + z) * h + y) * w + x] = acc / 27.0f;
                }
}

TEST(SlidingWindow, MirroringAnEquivariantNetworkChangesNothing) {
    const std::vector<int64_t> patch = {6, 7, 8};
    const Tensor image = randomImage({1, 13, 11, 20}, 11);
    Tensor plain, mirrored;
    for (bool mirror : {false, true}) {
        SlidingWindowOptions o;
        o.patch_size = patch;
        o.batch = 3;
        if (mirror) o.mirror_axes = {0, 1, 2};
        auto sw = SlidingWindow::create(
            std::make_unique<FnCompiled>(withBatch(3, 1, patch), withBatch(3, 1, patch), boxFilter),
            o);
        ASSERT_TRUE(sw.isOk());
        auto r = (*sw)->run(image);
        ASSERT_TRUE(r.isOk());
        (mirror ? mirrored : plain) = *r;
    }
    EXPECT_LE(maxAbsDiff(plain, mirrored), kSumTolerance);
    // And the patch borders do show (the test could fail): compare with the whole-image filter.
    Tensor whole(DType::kFloat32, {1, 1, 13, 11, 20});
    boxFilter(image.reshaped({1, 1, 13, 11, 20}), whole);
    EXPECT_GT(maxAbsDiff(plain, whole.reshaped({1, 13, 11, 20})), 1e-3f);
}

TEST(SlidingWindow, BatchSizeDoesNotChangeTheResult) {
    const std::vector<int64_t> patch = {6, 7, 8};
    const Tensor image = randomImage({1, 21, 16, 25}, 13);
    Tensor reference;
    for (int batch : {1, 4, 7}) {
        SlidingWindowOptions o;
        o.patch_size = patch;
        o.batch = batch;
        o.mirror_axes = {1};
        auto sw = SlidingWindow::create(
            std::make_unique<FnCompiled>(withBatch(batch, 1, patch), withBatch(batch, 1, patch),
                                         boxFilter),
            o);
        ASSERT_TRUE(sw.isOk());
        SlidingWindowStats stats;
        auto r = (*sw)->run(image, {}, &stats);
        ASSERT_TRUE(r.isOk());
        if (batch == 1) {
            reference = *r;
            EXPECT_EQ(stats.forward_passes, stats.patches * 2);
        } else {
            // Same patches in the same order: only the grouping into forward passes differs.
            EXPECT_LE(maxAbsDiff(reference, *r), 1e-7f) << "batch " << batch;
        }
    }
}

TEST(SlidingWindow, CancelStopsBetweenBatches) {
    const std::vector<int64_t> patch = {4, 4, 4};
    int runs = 0;
    SlidingWindowOptions o;
    o.patch_size = patch;
    o.batch = 2;
    auto sw =
        SlidingWindow::create(std::make_unique<FnCompiled>(
                                  withBatch(2, 1, patch), withBatch(2, 1, patch), boxFilter, &runs),
                              o);
    ASSERT_TRUE(sw.isOk());
    CancelToken token;
    std::vector<double> reported;
    Progress progress(
        [&](double f, std::string_view) {
            reported.push_back(f);
            if (f > 0.0) token.cancel();  // after the first batch
        },
        token);
    auto r = (*sw)->run(randomImage({1, 20, 20, 20}, 1), progress);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
    EXPECT_EQ(runs, 1);
    ASSERT_EQ(reported.size(), 2u);
    EXPECT_GT(reported[1], 0.0);
    EXPECT_LT(reported[1], 0.1);  // 9^3 windows / 2 per batch
}

// Sums larger than the memory this process may use are refused before a window runs: Linux
// over-commits, so allocating them would succeed and the process be killed while summing.
TEST(SlidingWindow, SumsLargerThanMemoryAreRefusedBeforeAnyWindowRuns) {
    const std::vector<int64_t> patch = {8, 8, 8};
    const int64_t edge = 256;
    const int64_t voxels = edge * edge * edge;
    // float16 sums (the default): 2 bytes per class and voxel.
    const auto classes =
        static_cast<int64_t>(memoryLimitBytes() / static_cast<uint64_t>(voxels * 2)) + 2;
    int runs = 0;
    SlidingWindowOptions o;
    o.patch_size = patch;
    auto sw = SlidingWindow::create(std::make_unique<FnCompiled>(
                                        withBatch(1, 1, patch), withBatch(1, classes, patch),
                                        [](const Tensor&, Tensor&) {}, &runs),
                                    o);
    ASSERT_TRUE(sw.isOk()) << sw.status().toString();
    auto r = (*sw)->run(Tensor(DType::kFloat32, {1, edge, edge, edge}), {});
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory) << r.status().toString();
    EXPECT_NE(r.status().message().find(std::to_string(classes) + " classes"), std::string::npos)
        << r.status().toString();
    EXPECT_NE(r.status().message().find("GiB of memory"), std::string::npos)
        << r.status().toString();
    EXPECT_EQ(runs, 0);
}

TEST(SlidingWindow, ProgressReachesOneOncePerBatch) {
    const std::vector<int64_t> patch = {4, 4, 4};
    SlidingWindowOptions o;
    o.patch_size = patch;
    o.batch = 3;
    auto sw = SlidingWindow::create(
        std::make_unique<FnCompiled>(withBatch(3, 1, patch), withBatch(3, 1, patch), boxFilter), o);
    ASSERT_TRUE(sw.isOk());
    std::vector<double> reported;
    SlidingWindowStats stats;
    auto r =
        (*sw)->run(randomImage({1, 8, 8, 10}, 1),
                   Progress([&](double f, std::string_view) { reported.push_back(f); }), &stats);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(static_cast<int64_t>(reported.size()), stats.forward_passes + 1);
    EXPECT_DOUBLE_EQ(reported.back(), 1.0);
    EXPECT_TRUE(std::is_sorted(reported.begin(), reported.end()));
}

TEST(SlidingWindow, BadInputsAreClearErrors) {
    const std::vector<int64_t> patch = {4, 4, 4};
    auto make = [&](SlidingWindowOptions o, Shape out_spatial = {4, 4, 4}) {
        return SlidingWindow::create(
            std::make_unique<FnCompiled>(withBatch(o.batch, 1, patch),
                                         withBatch(o.batch, 2, out_spatial), positionNet),
            o);
    };
    SlidingWindowOptions o;
    o.patch_size = patch;
    auto sw = make(o);
    ASSERT_TRUE(sw.isOk());
    auto r = (*sw)->run(randomImage({2, 8, 8, 8}, 1));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("channels"), std::string::npos) << r.status().message();
    r = (*sw)->run(randomImage({1, 8, 8}, 1));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    r = (*sw)->run(Tensor(DType::kInt64, {1, 8, 8, 8}));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);

    auto bad = make(o, {2, 2, 2});  // a network that downsamples
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("fully convolutional"), std::string::npos);

    SlidingWindowOptions bad_overlap = o;
    bad_overlap.overlap = 1.0;
    EXPECT_EQ(make(bad_overlap).status().code(), StatusCode::kInvalidArgument);
    SlidingWindowOptions bad_mirror = o;
    bad_mirror.mirror_axes = {3};
    EXPECT_NE(make(bad_mirror).status().message().find("mirror axis 3"), std::string::npos);
    bad_mirror.mirror_axes = {1, 1};
    EXPECT_NE(make(bad_mirror).status().message().find("twice"), std::string::npos);
}

// fp16 score sums (nnU-Net v2's predicted_logits): the same result as fp32 to fp16 precision,
// half the score memory, and the padded/cropped and mirrored paths give fp16 too.
TEST(SlidingWindow, HalfAccumulatorMatchesFloat32ToHalfPrecision) {
    const std::vector<float> w = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};  // 3 out x 2 in
    const std::vector<float> b = {0.1f, -0.2f, 0.3f};
    PointwiseBackend backend;
    const Graph graph = pointwiseGraph(2, 3, w, b);
    for (const Shape& shape : {Shape{2, 23, 17, 30}, Shape{2, 5, 17, 3}}) {
        SCOPED_TRACE(shapeToString(shape));
        Tensor image = randomImage(shape, 21);
        for (int64_t i = 0; i < image.numel(); ++i) image.data<float>()[i] *= 40.0f;  // |x| <= 120
        SlidingWindowOptions o;
        o.patch_size = {8, 6, 10};
        o.overlap = 0.5;
        o.batch = 3;
        o.mirror_axes = {0, 2};
        SlidingWindowStats s32, s16;
        auto full = slidingWindowInference(backend, graph, image, o, {}, &s32);
        o.accumulator = DType::kFloat16;
        auto half = slidingWindowInference(backend, graph, image, o, {}, &s16);
        ASSERT_TRUE(full.isOk() && half.isOk()) << half.status().toString();
        EXPECT_EQ(half->dtype(), DType::kFloat16);
        EXPECT_EQ(half->shape(), full->shape());
        const Tensor back = scoresAsFloat32(*half);
        ASSERT_EQ(back.dtype(), DType::kFloat32);
        // Every add rounds to fp16 (at most half a step, 2^-12 relative to the partial sum, which
        // never exceeds the final value here: the flips of a pointwise network agree). At most 8
        // windows x 4 flips = 32 adds per voxel: relative error <= 32 x 2^-12.
        double worst = 0.0;
        for (int64_t i = 0; i < back.numel(); ++i) {
            const double ref = full->data<float>()[i];
            const double err = std::abs(back.data<float>()[i] - ref) / std::max(1.0, std::abs(ref));
            worst = std::max(worst, err);
        }
        EXPECT_LE(worst, 32 * 0x1p-12) << "relative error";
        EXPECT_GT(worst, 0.0) << "fp16 rounding must show somewhere";
        const int64_t voxels = full->numel() / 3;
        int64_t padded = 1;
        for (size_t a = 0; a < 3; ++a) padded *= std::max(shape[a + 1], o.patch_size[a]);
        EXPECT_EQ(s32.accumulator_bytes, static_cast<size_t>((3 * 4 + 4) * padded));
        EXPECT_EQ(s16.accumulator_bytes, static_cast<size_t>((3 * 2 + 4) * padded));
        EXPECT_LE(voxels, padded);
    }
    SlidingWindowOptions bad;
    bad.patch_size = {8, 6, 10};
    bad.accumulator = DType::kInt32;
    const Status st = validateSlidingWindowOptions(bad, {});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("accumulator"), std::string::npos) << st.message();
}

TEST(SlidingWindow, BackendFailureNamesTheBatch) {
    const std::vector<int64_t> patch = {4, 4, 4};
    class Failing : public FnCompiled {
      public:
        using FnCompiled::FnCompiled;
        Status run(const std::vector<Tensor>&, std::vector<Tensor>&) override {
            return {StatusCode::kDeviceError, "node conv_3 (Conv): out of device memory"};
        }
    };
    SlidingWindowOptions o;
    o.patch_size = patch;
    auto sw = SlidingWindow::create(
        std::make_unique<Failing>(withBatch(1, 1, patch), withBatch(1, 1, patch), boxFilter), o);
    ASSERT_TRUE(sw.isOk());
    auto r = (*sw)->run(randomImage({1, 8, 8, 8}, 1));
    EXPECT_EQ(r.status().code(), StatusCode::kDeviceError);
    EXPECT_NE(r.status().message().find("batch 1 of 27"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("conv_3"), std::string::npos);
}

// The same box filter as a real Graph (3x3x3 Conv, weights 1/27, zero padding 1) on the
// reference backend: sliding-window results must match the hand-written network's, with batches
// (the backend re-infers shapes for batch > 1) and mirroring.
TEST(SlidingWindow, ReferenceBackendMatchesHandWrittenNetwork) {
    voxseg::engine::testing::GraphBuilder b;
    const ValueId x = b.input("x", {1, 1, 6, 7, 8});
    const ValueId w =
        b.constant("w", Tensor::fromFloats({1, 1, 3, 3, 3}, std::vector<float>(27, 1.0f / 27.0f)));
    const ValueId bias = b.constant("b", Tensor::fromFloats({1}, {0.0f}));
    b.output(b.node(OpKind::kConv, {x, w, bias}, [](Node& n) {
        n.conv.kernel = {3, 3, 3};
        n.conv.strides = {1, 1, 1};
        n.conv.dilations = {1, 1, 1};
        n.conv.pads_begin = {1, 1, 1};
        n.conv.pads_end = {1, 1, 1};
        n.conv.in_channels = 1;
        n.conv.out_channels = 1;
        n.conv.has_bias = true;
    }));
    const std::vector<int64_t> patch = {6, 7, 8};
    const Tensor image = randomImage({1, 13, 5, 20}, 17);  // y smaller than the patch
    SlidingWindowOptions o;
    o.patch_size = patch;
    o.batch = 3;
    o.mirror_axes = {2};
    auto backend = makeReferenceBackend();
    auto real = slidingWindowInference(*backend, b.graph(), image, o);
    ASSERT_TRUE(real.isOk()) << real.status().toString();
    auto sw = SlidingWindow::create(
        std::make_unique<FnCompiled>(withBatch(3, 1, patch), withBatch(3, 1, patch), boxFilter), o);
    ASSERT_TRUE(sw.isOk());
    auto expected = (*sw)->run(image);
    ASSERT_TRUE(expected.isOk());
    EXPECT_LE(maxAbsDiff(*real, *expected), kSumTolerance);
}

TEST(SlidingWindow, EnsembleAveragesNetworksBeforeWeighting) {
    // Two pointwise networks: the ensemble result is the mean of their whole-image outputs.
    const std::vector<float> w1 = {1.0f, -2.0f}, b1 = {0.5f};
    const std::vector<float> w2 = {-0.5f, 3.0f}, b2 = {-1.0f};
    const std::vector<int64_t> patch = {5, 6, 7};
    const Tensor image = randomImage({2, 9, 14, 11}, 23);
    int runs1 = 0, runs2 = 0;
    std::vector<std::unique_ptr<CompiledGraph>> nets;
    nets.push_back(std::make_unique<FnCompiled>(
        withBatch(2, 2, patch), withBatch(2, 1, patch),
        [&](const Tensor& in, Tensor& o) { pointwiseConv(in, o, w1, b1); }, &runs1));
    nets.push_back(std::make_unique<FnCompiled>(
        withBatch(2, 2, patch), withBatch(2, 1, patch),
        [&](const Tensor& in, Tensor& o) { pointwiseConv(in, o, w2, b2); }, &runs2));
    SlidingWindowOptions o;
    o.patch_size = patch;
    o.batch = 2;
    o.mirror_axes = {0};
    auto sw = SlidingWindow::create(std::move(nets), o);
    ASSERT_TRUE(sw.isOk()) << sw.status().toString();
    EXPECT_EQ((*sw)->numNetworks(), 2);
    SlidingWindowStats stats;
    auto r = (*sw)->run(image, {}, &stats);
    ASSERT_TRUE(r.isOk());
    Tensor e1(DType::kFloat32, {1, 1, 9 * 14 * 11}), e2(DType::kFloat32, {1, 1, 9 * 14 * 11});
    pointwiseConv(image.reshaped({1, 2, 9 * 14 * 11}), e1, w1, b1);
    pointwiseConv(image.reshaped({1, 2, 9 * 14 * 11}), e2, w2, b2);
    float worst = 0.0f;
    for (int64_t v = 0; v < 9 * 14 * 11; ++v)
        worst = std::max(worst, std::abs(r->data<float>()[v] -
                                         0.5f * (e1.data<float>()[v] + e2.data<float>()[v])));
    EXPECT_LE(worst, kSumTolerance * 8);
    EXPECT_EQ(runs1, runs2);
    EXPECT_EQ(stats.forward_passes, runs1 + runs2);

    std::vector<std::unique_ptr<CompiledGraph>> mismatched;
    mismatched.push_back(
        std::make_unique<FnCompiled>(withBatch(1, 1, patch), withBatch(1, 2, patch), positionNet));
    mismatched.push_back(
        std::make_unique<FnCompiled>(withBatch(1, 1, patch), withBatch(1, 3, patch), positionNet));
    o.batch = 1;
    auto bad = SlidingWindow::create(std::move(mismatched), o);
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("network 2 of the ensemble"), std::string::npos)
        << bad.status().message();
}

// ---- Post-processing helpers ----------------------------------------------------------------

TEST(ScoresToLabels, SoftmaxSigmoidArgmaxThreshold) {
    Tensor s = Tensor::fromFloats({3, 4}, {1, 0, 5, -1,  //
                                           2, 0, 1, -1,  //
                                           0, 3, 1, -2});
    Tensor p = s.clone();
    softmaxChannelsInPlace(p);
    for (int v = 0; v < 4; ++v) {
        float sum = 0;
        for (int k = 0; k < 3; ++k) sum += p.data<float>()[k * 4 + v];
        EXPECT_NEAR(sum, 1.0f, 1e-6f);
    }
    EXPECT_NEAR(p.data<float>()[0], std::exp(1.0) / (std::exp(1.0) + std::exp(2.0) + 1.0), 1e-6);
    std::vector<uint8_t> labels(4);
    ASSERT_TRUE(argmaxLabels(s, std::span<uint8_t>(labels)).isOk());
    EXPECT_EQ(labels, (std::vector<uint8_t>{1, 2, 0, 0}));  // ties: first channel wins
    std::vector<int16_t> mapped(4);
    const std::vector<int> values = {0, 300, 7};
    ASSERT_TRUE(argmaxLabels(s, std::span<int16_t>(mapped), values).isOk());
    EXPECT_EQ(mapped, (std::vector<int16_t>{300, 7, 0, 0}));
    // 300 does not fit uint8: an error, not a wrapped label.
    EXPECT_FALSE(argmaxLabels(s, std::span<uint8_t>(labels), values).isOk());
    std::vector<uint8_t> short_buffer(3);
    EXPECT_FALSE(argmaxLabels(s, std::span<uint8_t>(short_buffer)).isOk());

    Tensor q = s.clone();
    sigmoidInPlace(q);
    EXPECT_NEAR(q.data<float>()[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
    std::vector<uint8_t> t(4);
    ASSERT_TRUE(thresholdLabels(q, 0.5f, std::span<uint8_t>(t)).isOk());
    // voxel 1: channels 0/1 at 0.5 (not above), channel 2 at 0.95 -> 3; voxel 3: all below -> 0.
    EXPECT_EQ(t, (std::vector<uint8_t>{2, 3, 1, 0}));
}

// ---- nnU-Net's float16 arithmetic (Accumulation::kNnUNetFp16) against nnU-Net 2.5.1 itself:
// tests/engine/data/sliding_window/nnunet_fp16, tools/gen_nnunet_fp16_golden.py. Bit for bit.

std::string nnunetGoldenPath(const std::string& file) {
    return std::string(VOXSEG_SOURCE_DIR) + "/tests/engine/data/sliding_window/nnunet_fp16/" + file;
}

template <typename T>
std::vector<T> readRaw(const std::string& file, size_t count) {
    std::vector<T> v(count);
    std::ifstream in(nnunetGoldenPath(file), std::ios::binary);
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(T)));
    EXPECT_EQ(static_cast<size_t>(in.gcount()), count * sizeof(T)) << file;
    return v;
}

nlohmann::json nnunetGoldenIndex() {
    std::ifstream in(nnunetGoldenPath("index.json"));
    EXPECT_TRUE(in.good()) << "missing golden: run tools/gen_nnunet_fp16_golden.py";
    return nlohmann::json::parse(in);
}

int64_t product(const std::vector<int64_t>& v) {
    int64_t n = 1;
    for (int64_t x : v) n *= x;
    return n;
}

TEST(NnUNetFp16, GaussianIsComputeGaussianBitForBit) {
    const auto index = nnunetGoldenIndex();
    ASSERT_GE(index["gaussians"].size(), 3u);
    for (const auto& g : index["gaussians"]) {
        const auto patch = g["patch"].get<std::vector<int64_t>>();
        SCOPED_TRACE(shapeToString(patch));
        const auto expected = readRaw<uint16_t>(g["file"], static_cast<size_t>(product(patch)));
        const auto got = nnunet_fp16::importanceMap(patch, index["sigma_scale"].get<double>());
        ASSERT_EQ(got.size(), expected.size());
        int64_t differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
        EXPECT_EQ(differ, 0) << "of " << got.size() << " weights";
        // The map is scaled to 10 at the centre and its corners are float16 subnormals: the
        // float32 map of the normalized mode, rounded, is a different map.
        const int64_t centre = ((patch[0] / 2) * patch[1] + patch[1] / 2) * patch[2] + patch[2] / 2;
        EXPECT_EQ(halfToFloat(got[static_cast<size_t>(centre)]), 10.0f);
        EXPECT_LT(halfToFloat(got[0]), 6.2e-5f) << "corner weight is subnormal";
    }
}

// The golden network: out[c] = x[c] * scale[c] + ramp[c] (ramp: [C, patch]), per batch item.
std::unique_ptr<CompiledGraph> rampNetwork(const std::vector<float>& scale,
                                           const std::vector<float>& ramp, int batch,
                                           int64_t channels, const std::vector<int64_t>& patch) {
    const Shape shape = withBatch(batch, channels, patch);
    return std::make_unique<FnCompiled>(shape, shape, [=](const Tensor& in, Tensor& out) {
        const int64_t item = in.numel() / in.dim(0);
        const int64_t pv = item / channels;
        for (int64_t n = 0; n < in.dim(0); ++n)
            for (int64_t i = 0; i < item; ++i) {
                const float product = in.data<float>()[n * item + i] * scale[i / pv];
                out.data<float>()[n * item + i] = product + ramp[static_cast<size_t>(i)];
            }
    });
}

TEST(NnUNetFp16, SlidingWindowIsNnUNetPredictorBitForBit) {
    const auto index = nnunetGoldenIndex();
    const auto scale = index["scales"].get<std::vector<float>>();
    ASSERT_GE(index["cases"].size(), 4u);
    for (const auto& c : index["cases"]) {
        const std::string name = c["name"];
        SCOPED_TRACE(name);
        const auto shape = c["shape"].get<Shape>();
        const auto patch = c["patch"].get<std::vector<int64_t>>();
        const int64_t channels = shape[0];
        const int members = c["members"].get<int>();
        Tensor image(DType::kFloat32, shape);
        const auto pixels = readRaw<float>(name + ".input.f32", static_cast<size_t>(image.numel()));
        std::copy(pixels.begin(), pixels.end(), image.data<float>());
        const auto expected =
            readRaw<uint16_t>(name + ".output.u16", static_cast<size_t>(image.numel()));
        SlidingWindowOptions o;
        o.patch_size = patch;
        o.overlap = 1.0 - index["tile_step_size"].get<double>();
        o.gaussian = c["gaussian"].get<bool>();
        o.mirror_axes = c["mirror_axes"].get<std::vector<int>>();
        o.batch = 3;  // batches cut through a window's mirrored copies
        auto networks = [&] {
            std::vector<std::unique_ptr<CompiledGraph>> nets;
            for (int m = 0; m < members; ++m)
                nets.push_back(
                    rampNetwork(scale,
                                readRaw<float>(name + ".ramp" + std::to_string(m) + ".f32",
                                               static_cast<size_t>(channels * product(patch))),
                                o.batch, channels, patch));
            return nets;
        };
        o.accumulation = Accumulation::kNnUNetFp16;
        o.accumulator = DType::kFloat32;  // ignored: nnU-Net keeps float16
        auto window = SlidingWindow::create(networks(), o);
        ASSERT_TRUE(window.isOk()) << window.status().toString();
        EXPECT_EQ((*window)->accumulator(), DType::kFloat16);
        SlidingWindowStats stats;
        auto got = (*window)->run(image, {}, &stats);
        ASSERT_TRUE(got.isOk()) << got.status().toString();
        ASSERT_EQ(got->dtype(), DType::kFloat16);
        ASSERT_EQ(got->shape(), shape);
        EXPECT_EQ(stats.forward_passes % members, 0);
        int64_t differ = 0;
        for (size_t i = 0; i < expected.size(); ++i)
            differ += got->data<uint16_t>()[i] != expected[i];
        EXPECT_EQ(differ, 0) << "of " << expected.size() << " logits";
        // The normalized float16 mode rounds differently: the golden tells the two apart.
        o.accumulation = Accumulation::kNormalized;
        o.accumulator = DType::kFloat16;
        auto normalized = SlidingWindow::create(networks(), o);
        ASSERT_TRUE(normalized.isOk());
        auto other = (*normalized)->run(image);
        ASSERT_TRUE(other.isOk());
        int64_t other_differ = 0;
        for (size_t i = 0; i < expected.size(); ++i)
            other_differ += other->data<uint16_t>()[i] != expected[i];
        EXPECT_GT(other_differ, 0);
        std::printf(
            "%s: nnunet-fp16 %lld, normalized fp16 %lld of %zu logits differ from "
            "nnU-Net\n",
            name.c_str(), static_cast<long long>(differ), static_cast<long long>(other_differ),
            expected.size());
    }
}

// runLabels streams the single-network float16 sums plane by plane (NnUNetLabelSums): its labels
// must be argmaxLabels of run()'s whole sums on every golden grid (planes along axis 0: "odd",
// "mirror", "constant"; along axis 1 with axis 0 padded: "pad_folds" with its first member),
// while holding fewer sums where the streaming axis has several window starts.
TEST(NnUNetFp16, RunLabelsIsTheArgmaxOfTheWholeSums) {
    const auto index = nnunetGoldenIndex();
    const auto scale = index["scales"].get<std::vector<float>>();
    for (const auto& c : index["cases"]) {
        const std::string name = c["name"];
        SCOPED_TRACE(name);
        const auto shape = c["shape"].get<Shape>();
        const auto patch = c["patch"].get<std::vector<int64_t>>();
        const int64_t channels = shape[0];
        Tensor image(DType::kFloat32, shape);
        const auto pixels = readRaw<float>(name + ".input.f32", static_cast<size_t>(image.numel()));
        std::copy(pixels.begin(), pixels.end(), image.data<float>());
        SlidingWindowOptions o;
        o.patch_size = patch;
        o.overlap = 1.0 - index["tile_step_size"].get<double>();
        o.gaussian = c["gaussian"].get<bool>();
        o.mirror_axes = c["mirror_axes"].get<std::vector<int>>();
        o.batch = 3;
        o.accumulation = Accumulation::kNnUNetFp16;
        auto window = [&] {
            std::vector<std::unique_ptr<CompiledGraph>> nets;
            nets.push_back(rampNetwork(
                scale,
                readRaw<float>(name + ".ramp0.f32", static_cast<size_t>(channels * product(patch))),
                o.batch, channels, patch));
            return SlidingWindow::create(std::move(nets), o);
        };
        auto whole = window();
        ASSERT_TRUE(whole.isOk()) << whole.status().toString();
        auto scores = (*whole)->run(image);
        ASSERT_TRUE(scores.isOk()) << scores.status().toString();
        const int64_t voxels = image.numel() / channels;
        const std::vector<int> values = {0, 7, 300};
        std::vector<int16_t> expected(static_cast<size_t>(voxels));
        ASSERT_TRUE(argmaxLabels(*scores, std::span<int16_t>(expected), values).isOk());
        auto streamed = window();
        ASSERT_TRUE(streamed.isOk());
        SlidingWindowStats stats;
        auto labels = (*streamed)->runLabels(image, values, {}, &stats);
        ASSERT_TRUE(labels.isOk()) << labels.status().toString();
        ASSERT_EQ(labels->size(), expected.size());
        int64_t differ = 0;
        for (size_t i = 0; i < expected.size(); ++i) differ += (*labels)[i] != expected[i];
        EXPECT_EQ(differ, 0) << "of " << expected.size() << " labels";
        EXPECT_GT(std::count(expected.begin(), expected.end(), int16_t{300}), 0);
        if (name == "odd") {  // 11 planes, 4-plane windows at 0, 2, 4, 6, 7: at most 6 open
            const size_t whole_sums = static_cast<size_t>((channels + 1) * voxels) * 2;
            EXPECT_LT(stats.accumulator_bytes, whole_sums * 3 / 4);
        }
        // A value table of the wrong length is refused.
        EXPECT_FALSE((*streamed)->runLabels(image, std::vector<int>{0, 1}).isOk());
    }
}

TEST(NnUNetFp16, NamesAndBadCombinationsAreErrors) {
    EXPECT_EQ(*parseAccumulation("nnunet-fp16"), Accumulation::kNnUNetFp16);
    EXPECT_EQ(*parseAccumulation("normalized"), Accumulation::kNormalized);
    EXPECT_STREQ(accumulationName(Accumulation::kNnUNetFp16), "nnunet-fp16");
    const auto bad = parseAccumulation("fp16");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("nnunet-fp16"), std::string::npos);
    SlidingWindowOptions o;
    o.patch_size = {4, 4, 4};
    o.accumulation = Accumulation::kNnUNetFp16;
    EXPECT_TRUE(validateSlidingWindowOptions(o, {}).isOk());
    o.convention = WindowConvention::kMonai;
    const Status st = validateSlidingWindowOptions(o, {});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("convention"), std::string::npos) << st.message();
}

TEST(NnUNetFp16, DoubleToHalfRoundsOnce) {
    // 1 + 2^-11 is a tie between 1 and 1 + 2^-10 (even: 1); a hair above it rounds up, which
    // rounding through float32 first (the hair lost) would not.
    EXPECT_EQ(nnunet_fp16::doubleToHalf(1.0 + 0x1p-11), floatToHalf(1.0f));
    EXPECT_EQ(nnunet_fp16::doubleToHalf(1.0 + 0x1p-11 + 0x1p-40), floatToHalf(1.0f + 0x1p-10f));
    EXPECT_EQ(floatToHalf(static_cast<float>(1.0 + 0x1p-11 + 0x1p-40)), floatToHalf(1.0f));
    EXPECT_EQ(nnunet_fp16::doubleToHalf(-2.9e-8), floatToHalf(-0.0f));  // < half of 2^-24
    EXPECT_EQ(nnunet_fp16::doubleToHalf(-3.0e-8), floatToHalf(-0x1p-24f));
    EXPECT_EQ(nnunet_fp16::doubleToHalf(1e6), floatToHalf(INFINITY));
    EXPECT_EQ(nnunet_fp16::doubleToHalf(65504.0), floatToHalf(65504.0f));
}

}  // namespace
}  // namespace voxseg::engine
