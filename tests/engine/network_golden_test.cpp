// Whole-network goldens of issue 14 part 2: networks built by the real libraries (MONAI
// SwinUNETR v1/v2, UNETR, SegResNetDS, DynUNet with deep supervision; dynamic_network_architectures
// ResidualEncoderUNet in the ResEnc-M and ResEnc-L layouts, PrimusV3) at tiny configurations,
// exported from PyTorch 1.13 by
// tools/gen_network_golden.py. Each is imported with voxseg's importer, optimized, and run on every
// available backend against PyTorch's output; the max error and the label agreement (argmax over
// channels) are printed. Nets whose files are not committed (too large: see index.json
// "committed") are skipped unless the generator has been run locally. SwinUNETR v2 small is
// compared on the stored centre crop of its output (index.json output_crop).
#include "backends/registry.h"
#include "engine/onnx/import.h"

#include "engine/passes/optimize.h"
#include "tests/engine/golden_files.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>

namespace voxseg::engine {
namespace {

const std::filesystem::path kDir =
    std::filesystem::path(VOXSEG_SOURCE_DIR) / "tests" / "engine" / "golden" / "networks";

// fp32: max |error| <= 1e-4 * max |PyTorch output| (issue 14). bf16: golden_test.cpp's bound,
// or 1.5 x the error PyTorch itself shows with bf16 autocast's rounding when the network is more
// sensitive than that (index.json bf16_emulated_rel_error: Primus 5.8 %, its SwiGLU and rotary
// products of bf16-rounded tokens).
constexpr double kFp32RelToScale = 1e-4;
constexpr double kBf16RelToScale = 3e-2;
constexpr double kBf16OverEmulated = 1.5;

using Net = testing::GoldenNet;
using testing::readRaw;

const std::vector<Net>& nets() {
    static const std::vector<Net> all = testing::goldenEntries(kDir);
    return all;
}

// Share of voxels whose argmax over channels (dim 1 of NC...) agrees.
double labelAgreement(const std::vector<float>& a, const std::vector<float>& b, const Shape& s) {
    const size_t channels = size_t(s[1]);
    size_t voxels = 1;
    for (size_t d = 2; d < s.size(); ++d) voxels *= size_t(s[d]);
    size_t same = 0, total = 0;
    for (size_t n = 0; n < size_t(s[0]); ++n)
        for (size_t v = 0; v < voxels; ++v, ++total) {
            size_t ia = 0, ib = 0;
            for (size_t c = 1; c < channels; ++c) {
                const size_t i = (n * channels + c) * voxels + v;
                if (a[i] > a[(n * channels + ia) * voxels + v]) ia = c;
                if (b[i] > b[(n * channels + ib) * voxels + v]) ib = c;
            }
            same += ia == ib;
        }
    return total ? double(same) / double(total) : 1.0;
}

// The shape of the stored output: the network's, or its crop.
Shape storedShape(const Net& net) {
    Shape s = net.output_shape;
    for (size_t d = 2; d < s.size() && !net.crop_shape.empty(); ++d) s[d] = net.crop_shape[d - 2];
    return s;
}

// The box crop_begin/crop_shape of the spatial dims of `t` (the whole NC... output), or all of it.
std::vector<float> cropped(const std::vector<float>& t, const Net& net) {
    if (net.crop_shape.empty()) return t;
    const Shape& shape = net.output_shape;
    const Shape out_shape = storedShape(net);
    const size_t rank = shape.size();
    std::vector<float> out;
    out.reserve(size_t(numel(out_shape)));
    std::vector<int64_t> idx(rank, 0);
    for (size_t o = 0; o < size_t(numel(out_shape)); ++o) {
        size_t flat = 0;
        for (size_t d = 0; d < rank; ++d) {
            const int64_t at = idx[d] + (d >= 2 ? net.crop_begin[d - 2] : 0);
            flat = flat * size_t(shape[d]) + size_t(at);
        }
        out.push_back(t[flat]);
        for (size_t d = rank; d-- > 0;)
            if (++idx[d] < out_shape[d])
                break;
            else
                idx[d] = 0;
    }
    return out;
}

TEST(NetworkGolden, IndexListsTheNets) {
    std::vector<std::string> names;
    for (const Net& n : nets()) names.push_back(n.name);
    for (const char* want : {"resenc_m_small", "resenc_l_small", "primus_v3_tiny",
                             "swinunetr_v2_small", "unetr_tiny", "segresnetds", "dynunet_ds"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

int count(const Graph& g, OpKind op) {
    return static_cast<int>(
        std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

// Primus' decoder LayerNormNd, exported as ReduceMean over the channels, Sub, Pow, ReduceMean,
// Add, Sqrt, Div, Mul, Add, imports as ChannelLayerNorm nodes with nothing of the chain left.
TEST(NetworkGolden, PrimusDecoderLayerNormImportsAsOneNode) {
    const auto onnx_path = kDir / "primus_v3_tiny.onnx";
    if (!std::filesystem::exists(onnx_path)) GTEST_SKIP() << onnx_path << " not committed";
    auto g = importOnnx(onnx_path);
    ASSERT_TRUE(g.isOk()) << g.status().toString();
    EXPECT_GE(count(*g, OpKind::kChannelLayerNorm), 1);
    EXPECT_EQ(count(*g, OpKind::kReduceMean), 0);
    EXPECT_EQ(count(*g, OpKind::kSqrt), 0);
    EXPECT_EQ(count(*g, OpKind::kDiv), 0);
}

// SwinUNETR's attention, the shifted windows' masked blocks included, runs as fused Attention
// nodes: no Softmax (nor the full scores it would need) is left after optimize(); its window
// shifts (torch.roll over 3 axes: 3 Concats of 2 Slices each) are one Roll.
TEST(NetworkGolden, SwinUnetrShiftedWindowAttentionIsFused) {
    const auto onnx_path = kDir / "swinunetr_v2_small.onnx";
    if (!std::filesystem::exists(onnx_path)) GTEST_SKIP() << onnx_path << " not committed";
    auto g = importOnnx(onnx_path);
    ASSERT_TRUE(g.isOk()) << g.status().toString();
    const int softmax_before = count(*g, OpKind::kSoftmax);
    EXPECT_GE(softmax_before, 4);
    const Graph opt = optimize(*g);
    EXPECT_EQ(count(opt, OpKind::kSoftmax), 0);
    int masked = 0, fused = 0;
    for (const Node& n : opt.nodes) {
        if (n.op != OpKind::kAttention && n.op != OpKind::kMultiHeadAttention) continue;
        ++fused;
        masked += n.inputs.size() == 5 && n.inputs[4] >= 0;
    }
    EXPECT_EQ(fused, softmax_before);
    // Every stage's second block shifts its windows, but stage 4, whose 4^3 tokens fit in one
    // window (MONAI then shifts nothing): 3 of the 4 stages (docs/engine-ops.md).
    EXPECT_EQ(masked, 3);
    // Each shifted block rolls its windows there and back: one Roll each, no Slice/Concat pairs.
    EXPECT_EQ(count(opt, OpKind::kRoll), 2 * masked);
    EXPECT_EQ(count(opt, OpKind::kConcat), count(*g, OpKind::kConcat) - 6 * masked);
}

class NetworkParity : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(NetworkParity, MatchesPyTorch) {
    const auto& [backend_name, index] = GetParam();
    const Net& net = nets()[index];
    const auto onnx_path = kDir / (net.name + ".onnx");
    if (!std::filesystem::exists(onnx_path))
        GTEST_SKIP() << onnx_path << " not committed (too large); run tools/gen_network_golden.py";
    const auto names = availableBackends();
    if (std::find(names.begin(), names.end(), backend_name) == names.end())
        GTEST_SKIP() << "backend '" << backend_name << "' is not compiled into this build";
    auto backend = createBackend(backend_name);
    if (!backend)
        GTEST_SKIP() << "backend '" << backend_name
                     << "' unusable here: " << backend.status().toString();
    auto graph = importOnnx(onnx_path);
    ASSERT_TRUE(graph.isOk()) << graph.status().toString();
    const Tensor input = readRaw(kDir / (net.name + ".input.f32"), net.input_shape);
    const Shape want_shape = storedShape(net);
    const std::vector<float> want =
        readRaw(kDir / (net.name + ".output.f32"), want_shape).toFloats();
    double scale = 0;
    for (float v : want) scale = std::max(scale, double(std::abs(v)));
    ASSERT_GT(scale, 0.1) << "degenerate golden output";
    const Graph g = optimize(*graph);
    for (Precision p : {Precision::kFloat32, Precision::kBFloat16}) {
        if (!(*backend)->supportsPrecision(p)) continue;
        SCOPED_TRACE(net.name + " on " + backend_name + " " + precisionName(p));
        CompileOptions options;
        options.precision = p;
        if (const Status why = (*backend)->supportsGraph(g, {net.input_shape}); !why.isOk())
            GTEST_SKIP() << backend_name << " does not run this network: " << why.toString();
        auto exe = (*backend)->compile(g, {net.input_shape}, options);
        ASSERT_TRUE(exe.isOk()) << exe.status().toString();
        std::vector<Tensor> out;
        const Status s = (*exe)->run({input}, out);
        ASSERT_TRUE(s.isOk()) << s.toString();
        ASSERT_EQ(out.size(), 1u);
        ASSERT_EQ(out[0].shape(), net.output_shape);
        const std::vector<float> got = cropped(out[0].toFloats(), net);
        double max_err = 0;
        size_t worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            const double e = std::isnan(got[i]) ? INFINITY : std::abs(double(got[i]) - want[i]);
            if (e > max_err) max_err = e, worst = i;
        }
        const double bound =
            (p == Precision::kFloat32
                 ? kFp32RelToScale
                 : std::max(kBf16RelToScale, kBf16OverEmulated * net.bf16_emulated_rel_error)) *
            scale;
        std::cout << "[network golden] " << net.name << " " << backend_name << " "
                  << precisionName(p) << ": max abs error " << max_err << " = " << max_err / scale
                  << " x max|y| (bound " << bound << ", max |y| " << scale << "), labels agree on "
                  << 100.0 * labelAgreement(got, want, want_shape) << " % of voxels, "
                  << g.nodes.size() << " nodes\n";
        EXPECT_LE(max_err, bound) << "worst element " << worst << ": got " << got[worst]
                                  << ", PyTorch " << want[worst];
    }
}

std::string paramName(const ::testing::TestParamInfo<NetworkParity::ParamType>& info) {
    return std::get<0>(info.param) + "_" + nets()[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(Nets, NetworkParity,
                         ::testing::Combine(::testing::Values("reference", "cpu", "cuda"),
                                            ::testing::Range<size_t>(0, nets().size())),
                         paramName);

}  // namespace
}  // namespace voxseg::engine
