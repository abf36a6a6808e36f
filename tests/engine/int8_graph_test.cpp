// Whole graphs in int8 on the cpu backend (Precision::kInt8, docs/int8.md): scales from the
// min/max of the fp32 activations (observed with engine/activation_observer.h), then
// - a pure conv chain equals the exact integer reference (engine/quant/int8_conv_reference.h)
//   bit for bit, u8 handed from conv to conv and the last conv's float32 result;
// - an nnU-Net level (conv, InstanceNorm, LeakyReLU, residual add, ConvTranspose, concat) stays
//   close to fp32 (the bound below);
// - float_layers and tensors without parameters stay fp32;
// - a compile without a record, or with weight bits this CPU does not multiply exactly, is
//   refused with the reason.
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model_quantization.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_conv_reference.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/int8_test_graphs.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

using testing::countOf;

using testing::calibrateMinMax;

struct Outcome {
    std::vector<float> out;
    std::string describe;
};

Outcome run(const Graph& g, const Tensor& input, Precision p,
            std::shared_ptr<const QuantizationRecord> record = nullptr, bool halo_sources = true) {
    CompileOptions options;
    options.precision = p;
    options.quantization = std::move(record);
    options.int8_halo_sources = halo_sources;
    auto exe = makeCpuBackend()->compile(g, {input.shape()}, options);
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe.isOk()) return {};
    std::vector<Tensor> out;
    EXPECT_TRUE((*exe)->run({input}, out).isOk());
    return {out[0].toFloats(), (*exe)->describe()};
}

// The nnU-Net level's bound against fp32: 3 % of the output's range at most, 0.5 % on average.
testing::Int8Error withinLevelBound(const std::vector<float>& int8,
                                    const std::vector<float>& fp32) {
    const testing::Int8Error e = testing::int8ErrorVsFp32(int8, fp32);
    EXPECT_LT(e.max, 0.03 * e.range);
    EXPECT_LT(e.mean, 0.005 * e.range);
    return e;
}

float roundedToBf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    std::memcpy(&f, &u, 4);
    return f;
}

// 5 -> 8 (3x3x3) + ReLU -> 12 (3x3x3, stride 2) + LeakyReLU -> 6 (1x1x1).
Graph convChain() {
    GraphBuilder b;
    ValueId y = b.input("x", {2, 5, 11, 10, 9});
    y = b.conv(y, 5, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    y = b.node(OpKind::kRelu, {y});
    y = b.conv(y, 8, 12, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1});
    y = b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.1f; });
    b.output(b.conv(y, 12, 6, {1, 1, 1}));
    return b.graph();
}

// The chain in integers (int8_conv_reference.h) with the record's parameters, as the plan
// builds it: u8 between the convolutions, the last one's float32 result.
std::vector<float> chainReference(const Graph& imported, const Tensor& input,
                                  const QuantizationRecord& record) {
    const Graph g = optimize(imported);
    const int qmax = quant::weightQmaxForBits(record.weight_bits);
    std::vector<uint8_t> act;
    for (float v : input.toFloats())
        act.push_back(quant::quantizeActivation(v, record.activations.at("x")));
    Shape xs = input.shape();
    std::vector<float> result;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const Node& n = g.nodes[i];
        quant::Int8ConvSpec s = quant::int8ConvGeometry(n, xs);
        const bool last = i + 1 == g.nodes.size();
        s.dst_f32 = last;
        const auto w = quant::quantizeWeightsPerChannel(g.constant(n.inputs[1]).toFloats(),
                                                        s.out_channels, qmax);
        const auto src = record.activations.at(g.values[n.inputs[0]].name);
        const auto dst = last ? quant::ActivationQuant{1.0f, 0}
                              : record.activations.at(g.values[n.outputs[0]].name);
        quant::setRequantisation(s, src, w.scales, dst, g.constant(n.inputs[2]).toFloats());
        auto r = quant::int8ConvReference(s, act, w.values, {});
        EXPECT_TRUE(r.isOk()) << r.status().toString();
        if (!r.isOk()) return {};
        act = r->dst;
        result = r->unrounded;
        const auto o = quant::outputSize(s);
        xs = {s.batch, s.out_channels, o[0], o[1], o[2]};
    }
    return result;
}

TEST(Int8Graph, ConvChainEqualsTheIntegerReferenceBitForBit) {
    const Graph g = convChain();
    const Tensor input = testing::seededTensor({2, 5, 11, 10, 9}, 3);
    const auto record = calibrateMinMax(g, input);
    ASSERT_EQ(record->activations.size(), 3u);
    const Outcome int8 = run(g, input, Precision::kInt8, record);
    EXPECT_EQ(countOf(int8.describe, "conv int8"), 3) << int8.describe;
    EXPECT_EQ(countOf(int8.describe, ": quantize "), 1) << int8.describe;  // the input only
    std::vector<float> want = chainReference(g, input, *record);
    // Where the plan's float parts are bf16 (cpuInt8FloatPrecision) the last conv stores its
    // float result as bf16, rounded to nearest even.
    if (cpuInt8FloatPrecision() == Precision::kBFloat16)
        for (float& v : want) v = roundedToBf16(v);
    ASSERT_EQ(int8.out.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += int8.out[i] != want[i];
    EXPECT_EQ(differ, 0u) << "of " << want.size() << " [" << int8.describe << "]";
    // The reference is not trivially equal to fp32: quantisation changed the result.
    const Outcome fp32 = run(g, input, Precision::kFloat32);
    size_t changed = 0;
    for (size_t i = 0; i < want.size(); ++i) changed += fp32.out[i] != want[i];
    EXPECT_GT(changed, want.size() / 2);
}

TEST(Int8Graph, UnetLevelStaysCloseToFp32) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers = quant::defaultInt8FloatLayers(g);
    ASSERT_EQ(record->float_layers.size(), 2u);
    const Outcome fp32 = run(g, input, Precision::kFloat32);
    const Outcome int8 = run(g, input, Precision::kInt8, record);
    EXPECT_EQ(countOf(int8.describe, "conv int8"), 5) << int8.describe;  // 7 convs, 2 float
    // Four of the five read a norm (NormsWriteTheU8OfTheirInt8Readers), one the concat, which
    // quantises its two inputs into its u8 output; the first norm's reorder is left where the
    // float first conv left its 8 channels in a padded 16-channel block (AVX-512). Without
    // either fusion: 5 quantising reorders and a float concat. The skip connection's norm
    // writes the concat's u8 itself where its layout allows: into its channels of the concat's
    // output where that is channels-last (`+into concat u8`), else a u8 of its own the concat
    // copies (`+concat u8`, `concat copy`); no float either way. The ConvTranspose runs as an
    // int8 1x1 convolution whose u8 its scatter copies into the concat's channels where the
    // layouts are channels-last (`scatter into concat u8`, no float up-sampled tensor).
    EXPECT_LE(countOf(int8.describe, ": quantize "), 1) << int8.describe;
    const int copies = countOf(int8.describe, ": concat copy ");
    const int into = countOf(int8.describe, "+into concat u8");
    const int in_place = countOf(int8.describe, "scatter into concat u8") + into;
    EXPECT_EQ(countOf(int8.describe, ": concat quantize ") + copies + in_place, 2) << int8.describe;
    EXPECT_EQ(countOf(int8.describe, "+concat u8"), copies) << int8.describe;
    std::printf("skip connection written as the concat's u8 by its norm: %s\n",
                into     ? "yes, in place"
                : copies ? "yes, copied"
                         : "no (padded layout)");
    EXPECT_EQ(countOf(int8.describe, "concat simple"), 0) << int8.describe;
    ASSERT_EQ(int8.out.size(), fp32.out.size());
    const testing::Int8Error e = withinLevelBound(int8.out, fp32.out);
    // Bound: 3 % of the output's range at most, 0.5 % on average (measured 1.2 % and 0.18 %).
    std::printf("int8 vs fp32: max %.4f, mean %.5f, output range %.3f\n", e.max, e.mean, e.range);
    EXPECT_GT(e.max, 0.0);  // it did run in int8
}

// The tensor the ConvTranspose of optimize(g) reads.
std::string upsamplingInput(const Graph& g) {
    const Graph opt = optimize(g);
    const auto it = std::find_if(opt.nodes.begin(), opt.nodes.end(),
                                 [](const Node& n) { return n.op == OpKind::kConvTranspose; });
    return it == opt.nodes.end() ? std::string() : opt.values[it->inputs[0]].name;
}

// A float up-sampling written into the concat's u8 (`scatter into concat u8`) quantises the same
// values with the same reorder as the concat's own step: the same graph with the ConvTranspose's
// result also a graph output (so it must exist in float, and the concat quantises it) gives the
// same result bit for bit. The record asks for no int8 up-sampling and has no parameters for its
// input (UpsamplingRunsInInt8 covers the int8 one). Where the up-sampling does not run in place
// (no AMX/AVX-512 channels-last layout) both plans are the same and the test says so.
TEST(Int8Graph, UpsamplingIntoTheConcatChangesNoValue) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers = quant::defaultInt8FloatLayers(g);
    ASSERT_EQ(record->activations.erase(upsamplingInput(g)), 1u);
    Graph also_output = g;
    for (const Node& n : also_output.nodes)
        if (n.op == OpKind::kConvTranspose) also_output.outputs.push_back(n.outputs[0]);
    ASSERT_EQ(also_output.outputs.size(), 2u);
    const auto plan = quant::int8LayerPlan(optimize(g), *record, {/*upsampling=*/true});
    EXPECT_EQ(std::count_if(plan.begin(), plan.end(),
                            [](const quant::Int8Layer& l) { return l.concat_u8; }),
              2)  // the skip connection's norm and the ConvTranspose
        << "policy";
    EXPECT_EQ(std::count_if(plan.begin(), plan.end(),
                            [](const quant::Int8Layer& l) { return l.int8_upsample; }),
              0);
    const auto plan2 = quant::int8LayerPlan(optimize(also_output), *record);
    EXPECT_EQ(std::count_if(plan2.begin(), plan2.end(),
                            [](const quant::Int8Layer& l) { return l.concat_u8; }),
              1)
        << "a ConvTranspose whose float is a graph output is not written into the concat";
    const Outcome in_place = run(g, input, Precision::kInt8, record);
    const Outcome separate = run(also_output, input, Precision::kInt8, record);
    EXPECT_EQ(countOf(separate.describe, "scatter into concat u8"), 0) << separate.describe;
    const int written = countOf(in_place.describe, "scatter into concat u8");
    std::printf("up-sampling quantised into the concat: %s\n", written ? "yes" : "no (layout)");
    ASSERT_EQ(in_place.out.size(), separate.out.size());
    size_t differ = 0;
    for (size_t i = 0; i < in_place.out.size(); ++i) differ += in_place.out[i] != separate.out[i];
    EXPECT_EQ(differ, 0u) << "of " << in_place.out.size() << " [" << in_place.describe << "]";
}

// int8 up-sampling (int8_policy.h, int8_upsample): with the record's int8_upsampling and its
// input calibrated, the level's ConvTranspose runs as an int8 1x1 convolution whose u8 is
// scattered into the concat, its input norm writes u8 only, and the level stays within the bound
// of the int8 level above. Only where the record and the backend ask for it (the cuda plan does
// not), and not for a ConvTranspose whose float is a graph output.
TEST(Int8Graph, UpsamplingRunsInInt8) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers = quant::defaultInt8FloatLayers(g);
    ASSERT_TRUE(record->activations.count(upsamplingInput(g)));
    record->int8_upsampling = true;
    auto upsamplings = [&](const Graph& graph, bool backend) {
        const auto plan = quant::int8LayerPlan(graph, *record, {backend});
        return std::count_if(plan.begin(), plan.end(), [](const quant::Int8Layer& l) {
            return l.int8_upsample && l.concat_u8;
        });
    };
    EXPECT_EQ(upsamplings(optimize(g), true), 1);
    EXPECT_EQ(upsamplings(optimize(g), false), 0);
    record->int8_upsampling = false;
    EXPECT_EQ(upsamplings(optimize(g), true), 0);
    record->int8_upsampling = true;
    Graph also_output = g;
    for (const Node& n : also_output.nodes)
        if (n.op == OpKind::kConvTranspose) also_output.outputs.push_back(n.outputs[0]);
    EXPECT_EQ(upsamplings(optimize(also_output), true), 0);

    const Outcome fp32 = run(g, input, Precision::kFloat32);
    const Outcome int8 = run(g, input, Precision::kInt8, record);
    EXPECT_EQ(countOf(int8.describe, "deconv k=s: conv1x1 int8"), 1) << int8.describe;
    auto float_up = std::make_shared<QuantizationRecord>(*record);
    float_up->int8_upsampling = false;
    const Outcome int8_float_up = run(g, input, Precision::kInt8, float_up);
    EXPECT_EQ(countOf(int8_float_up.describe, "deconv k=s: conv1x1 int8"), 0);
    ASSERT_EQ(int8.out.size(), fp32.out.size());
    const testing::Int8Error e = withinLevelBound(int8.out, fp32.out);
    const testing::Int8Error ef = testing::int8ErrorVsFp32(int8_float_up.out, fp32.out);
    std::printf("int8 vs fp32, range %.3f: max %.4f, mean %.5f (float up-sampling: %.4f, %.5f)\n",
                e.range, e.max, e.mean, ef.max, ef.mean);
    EXPECT_GT(e.max, 0.0);
}

// Halo sources (int8_policy.h): the level's zero-pointed norm outputs that only int8 Convs padded
// alike read get a halo in the policy where the backend asks for it; where the layouts are
// channels-last (AVX-512, AMX) the cpu plan writes them so (`+halo`) and their Convs run unpadded
// on them (` halo`), and the level stays within its bound of fp32.
TEST(Int8Graph, HaloSourcesFeedUnpaddedConvs) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers = quant::defaultInt8FloatLayers(g);
    auto halos = [&](quant::Int8Backend backend) {
        const auto plan = quant::int8LayerPlan(optimize(g), *record, backend);
        return std::count_if(plan.begin(), plan.end(), [](const quant::Int8Layer& l) {
            return l.halo_lo != std::array<int64_t, 3>{} || l.halo_hi != std::array<int64_t, 3>{};
        });
    };
    EXPECT_GT(halos({false, true}), 0);
    EXPECT_EQ(halos({false, false}), 0);
    const Outcome fp32 = run(g, input, Precision::kFloat32);
    const Outcome int8 = run(g, input, Precision::kInt8, record);
    const int norms = countOf(int8.describe, " +halo"), convs = countOf(int8.describe, " halo]");
    std::printf("norms writing a halo: %d, convolutions reading one: %d\n", norms, convs);
    EXPECT_GE(convs, norms) << int8.describe;
    EXPECT_EQ(norms == 0, convs == 0) << int8.describe;
    withinLevelBound(int8.out, fp32.out);
}

// The level's concat as a halo source: its in-place writers (the skip's norm, from float or
// 8-bit inputs; the up-sampling, float and quantised by a reorder or int8 and scattered) write
// into the interior, the concat
// step fills the halo, and the decoder's first convolution runs unpadded on it. The accumulators
// are the padded zero-point convolution's, so the output equals the plan without halos: the
// folded bias (zp * sum w in the bias, quant::foldSourceZeroPointIntoHalo) may round a
// requantised value the other way, by one step at most.
TEST(Int8Graph, ConcatHaloEqualsThePaddedPlan) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers = quant::defaultInt8FloatLayers(g);
    for (const int variant : {0, 1, 2}) {  // float up-sampling, int8, int8 + 8-bit norm inputs
        const char* what[] = {"float up-sampling", "int8 up-sampling", "+ 8-bit norm inputs"};
        SCOPED_TRACE(what[variant]);
        auto r = std::make_shared<QuantizationRecord>(*record);
        r->int8_upsampling = variant > 0;
        if (variant == 2) ASSERT_GT(testing::addNormInputScales(g, input, *r), 0u);
        const Outcome halo = run(g, input, Precision::kInt8, r);
        const Outcome padded = run(g, input, Precision::kInt8, r, /*halo_sources=*/false);
        if (countOf(halo.describe, "ndhwc:u8") == 0) GTEST_SKIP() << "no channels-last int8 plan";
        EXPECT_EQ(countOf(halo.describe, "concat halo"), 1) << halo.describe;
        EXPECT_EQ(countOf(padded.describe, "halo"), 0) << padded.describe;
        ASSERT_EQ(halo.out.size(), padded.out.size());
        const testing::Int8Error e = testing::int8ErrorVsFp32(halo.out, padded.out);
        size_t differ = 0;
        for (size_t i = 0; i < halo.out.size(); ++i) differ += halo.out[i] != padded.out[i];
        std::printf("%s: %zu of %zu outputs differ, max %.5f of range %.3f\n", what[variant],
                    differ, halo.out.size(), e.max, e.range);
        EXPECT_LT(e.max, 0.01 * e.range);
        EXPECT_LT(differ, halo.out.size() / 100);
    }
}

// Tap channels (int8_policy.h): with every convolution int8 (no float_layers), the level's first
// convolution, on the 2-channel graph input, runs as a 1x1 convolution over a u8 tensor of its
// 72 kernel taps (`quantize taps`), its zero point folded into the bias. The accumulators are
// the padded convolution's, so the output equals the plan without tap channels (and halos) but
// for a requantised value the folded bias rounds the other way. Writing the taps in the wrong
// order or without the padding's zero point changes most outputs.
TEST(Int8Graph, TapChannelsEqualThePaddedFirstConvolution) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers.clear();
    const Outcome taps = run(g, input, Precision::kInt8, record);
    const Outcome padded = run(g, input, Precision::kInt8, record, /*halo_sources=*/false);
    EXPECT_EQ(countOf(taps.describe, "quantize taps"), 1) << taps.describe;
    EXPECT_EQ(countOf(taps.describe, " taps"), 2) << taps.describe;  // and its convolution
    EXPECT_EQ(countOf(padded.describe, "taps"), 0) << padded.describe;
    ASSERT_EQ(taps.out.size(), padded.out.size());
    size_t differ = 0;
    for (size_t i = 0; i < taps.out.size(); ++i) differ += taps.out[i] != padded.out[i];
    const testing::Int8Error e = testing::int8ErrorVsFp32(taps.out, padded.out);
    std::printf("tap channels: %zu of %zu outputs differ, max %.5f of range %.3f\n", differ,
                taps.out.size(), e.max, e.range);
    EXPECT_LT(e.max, 0.01 * e.range);
    EXPECT_LT(differ, taps.out.size() / 100);
}

// calibrate --zero-points where-needed: the level's LeakyReLU outputs lose their zero points (the
// ranges as calibrateMinMax observed them), the result stays within the same bounds of fp32, and
// on AMX the int8 convolutions reading them run on brgconv instead of the zero-point jit kernel.
TEST(Int8Graph, UnetLevelWithZeroPointsWhereNeededStaysCloseToFp32) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers = quant::defaultInt8FloatLayers(g);
    auto where = std::make_shared<QuantizationRecord>(*record);
    where->zero_points = quant::ZeroPoints::kWhereNeeded;
    const std::set<std::string> leaky = quant::int8LeakyReluOutputs(optimize(g));
    int before = 0, after = 0;
    for (auto& [name, q] : where->activations) {
        before += q.zero_point != 0;
        const float lo = -static_cast<float>(q.zero_point) * q.scale;
        const float hi = static_cast<float>(255 - q.zero_point) * q.scale;
        if (leaky.count(name))
            q = *quant::activationQuantFromRange(lo, hi, name, quant::ZeroPoints::kWhereNeeded);
        after += q.zero_point != 0;
    }
    std::printf("activations with a zero point: %d -> %d of %zu\n", before, after,
                where->activations.size());
    EXPECT_LT(after, before);
    const Outcome fp32 = run(g, input, Precision::kFloat32);
    const Outcome int8 = run(g, input, Precision::kInt8, where);
    EXPECT_EQ(countOf(int8.describe, "conv int8"), 5) << int8.describe;
    std::printf("int8 convs on brgconv: %d (zero points always: %d)\n",
                countOf(int8.describe, "conv int8 brg"),
                countOf(run(g, input, Precision::kInt8, record).describe, "conv int8 brg"));
    const testing::Int8Error e = withinLevelBound(int8.out, fp32.out);
    std::printf("int8 (zero points where needed) vs fp32: max %.4f, mean %.5f, range %.3f\n", e.max,
                e.mean, e.range);
}

// 8-bit normalisation inputs (docs/int8.md): the convolutions before the level's norms write s8
// per channel, the norms read it, and the result stays as close to fp32 as the u8 scheme's.
TEST(Int8Graph, UnetLevelWithEightBitNormInputsStaysCloseToFp32) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);
    record->float_layers = quant::defaultInt8FloatLayers(g);
    const auto candidates = quant::int8NormInputs(g, record->float_layers);
    for (const auto& in : candidates) {  // InstanceNorms: the conv's bias is left out of the s8
        EXPECT_EQ(static_cast<int64_t>(in.dropped_bias.size()), in.channels) << in.tensor;
        std::printf("8-bit norm input %s (%s -> %s)\n", in.tensor.c_str(), in.conv.c_str(),
                    in.norm.c_str());
    }
    const size_t added = testing::addNormInputScales(g, input, *record);
    ASSERT_EQ(added, candidates.size());
    ASSERT_GE(added, 2u);
    const Outcome fp32 = run(g, input, Precision::kFloat32);
    const Outcome int8 = run(g, input, Precision::kInt8, record);
    EXPECT_EQ(countOf(int8.describe, "conv int8"), 5) << int8.describe;
    EXPECT_EQ(countOf(int8.describe, "->ndhwc:s8]") + countOf(int8.describe, "->ndhwc:s8 halo]"),
              static_cast<int>(added))
        << int8.describe;
    EXPECT_EQ(countOf(int8.describe, "norm ndhwc:s8 "), static_cast<int>(added)) << int8.describe;
    ASSERT_EQ(int8.out.size(), fp32.out.size());
    const testing::Int8Error e = withinLevelBound(int8.out, fp32.out);
    std::printf("int8 (8-bit norm inputs) vs fp32: max %.4f, mean %.5f, output range %.3f\n", e.max,
                e.mean, e.range);
    // A wrong scale is seen: the first norm input's scales 4x too small saturate its values.
    auto wrong = std::make_shared<QuantizationRecord>(*record);
    for (float& sc : wrong->norm_inputs.begin()->second) sc *= 0.25f;
    const Outcome bad = run(g, input, Precision::kInt8, wrong);
    const testing::Int8Error eb = testing::int8ErrorVsFp32(bad.out, fp32.out);
    EXPECT_GT(eb.mean, 2 * e.mean) << "saturated norm inputs changed nothing: not read as s8?";
}

// calibrate --keep-float: the first and/or last eligible Conv stay float; with none, every Conv of
// the level runs int8 (the image quantised by a reorder) and stays within the bounds.
TEST(Int8Graph, KeepFloatChoosesTheEndsAndNoneRunsEveryConvInInt8) {
    const Graph g = testing::int8UnetLevel();
    const auto all = quant::int8ConvCandidates(g);
    ASSERT_EQ(all.size(), 7u);
    using quant::int8FloatLayers;
    EXPECT_EQ(int8FloatLayers(g, {}), quant::defaultInt8FloatLayers(g));
    EXPECT_EQ(int8FloatLayers(g, {true, false}), std::vector<std::string>{all.front().node});
    EXPECT_EQ(int8FloatLayers(g, {false, true}), std::vector<std::string>{all.back().node});
    EXPECT_TRUE(int8FloatLayers(g, {false, false}).empty());
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    auto record = calibrateMinMax(g, input);  // every candidate tensor, the image included
    testing::addNormInputScales(g, input, *record);
    const Outcome fp32 = run(g, input, Precision::kFloat32);
    const Outcome int8 = run(g, input, Precision::kInt8, record);
    EXPECT_EQ(countOf(int8.describe, "conv int8"), 7) << int8.describe;
    const testing::Int8Error e = withinLevelBound(int8.out, fp32.out);
    std::printf("int8, every conv, 8-bit norm inputs, vs fp32: max %.4f, mean %.5f, range %.3f\n",
                e.max, e.mean, e.range);
}

// x -> conv -> IN + LeakyReLU -> conv -> IN + LeakyReLU -> 1x1 conv; when `branch`, the second
// norm's result is a graph output too.
Graph normStack(bool branch) {
    GraphBuilder b;
    auto normAct = [&](ValueId y, int64_t c) {
        y = b.norm(OpKind::kInstanceNorm, y, c);
        return b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
    };
    ValueId y = b.input("x", {1, 2, 12, 11, 10});
    y = normAct(b.conv(y, 2, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}), 16);
    y = normAct(b.conv(y, 16, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}), 16);
    b.output(b.conv(y, 16, 3, {1, 1, 1}));
    if (branch) b.output(y);
    return b.graph();
}

// The policy marks both norms (each read by an int8 Conv) and keeps the float of the second only
// when it is a graph output too.
TEST(Int8Graph, PolicyMarksNormsReadByInt8Convs) {
    for (bool branch : {false, true}) {
        const Graph g = optimize(normStack(branch));
        auto record = std::make_shared<QuantizationRecord>();
        for (const std::string& t : quant::int8CandidateTensors(g, {}))
            record->activations[t] = {0.02f, 10};
        const auto plan = quant::int8LayerPlan(g, *record);
        int norms = 0;
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            if (g.nodes[i].op != OpKind::kInstanceNorm) continue;
            ++norms;
            EXPECT_TRUE(plan[i].dst_u8) << g.nodes[i].name;
            EXPECT_EQ(plan[i].keep_float, branch && norms == 2) << g.nodes[i].name;
        }
        EXPECT_EQ(norms, 2);
    }
}

// Norms write the u8 their int8 readers take in their own pass (int8_policy.h): no quantising
// reorder after them, float32 only where something else reads it.
TEST(Int8Graph, NormsWriteTheU8OfTheirInt8Readers) {
    for (bool branch : {false, true}) {
        const Graph g = normStack(branch);
        const Tensor input = testing::seededTensor({1, 2, 12, 11, 10}, 5);
        const auto record = calibrateMinMax(g, input);
        CompileOptions options;
        options.precision = Precision::kInt8;
        options.quantization = record;
        auto exe = makeCpuBackend()->compile(g, {input.shape()}, options);
        ASSERT_TRUE(exe.isOk()) << exe.status().toString();
        const std::string plan = (*exe)->describe();
        EXPECT_EQ(countOf(plan, "conv int8"), 3) << plan;
        EXPECT_EQ(countOf(plan, ": quantize "), 1) << plan;  // the graph input's only
        // The norm steps: "instancenorm <layout>:<float> -><layout>:u8" writes u8 only,
        // "... +..." both (the float is bf16 where cpuInt8FloatPrecision says so).
        const std::string type =
            cpuInt8FloatPrecision() == Precision::kBFloat16 ? ":bf16 " : ":f32 ";
        EXPECT_EQ(countOf(plan, type + "->"), branch ? 1 : 2) << plan;
        EXPECT_EQ(countOf(plan, type + "+"), branch ? 1 : 0) << plan;
        std::vector<Tensor> out;
        ASSERT_TRUE((*exe)->run({input}, out).isOk());
        ASSERT_EQ(out.size(), branch ? 2u : 1u);
        const Outcome fp32 = run(g, input, Precision::kFloat32);
        const std::vector<float> head = out[0].toFloats();
        ASSERT_EQ(head.size(), fp32.out.size());
        double worst = 0, lo = 1e30, hi = -1e30;
        for (size_t i = 0; i < head.size(); ++i) {
            worst = std::max<double>(worst, std::abs(head[i] - fp32.out[i]));
            lo = std::min<double>(lo, fp32.out[i]);
            hi = std::max<double>(hi, fp32.out[i]);
        }
        EXPECT_LT(worst, 0.05 * (hi - lo)) << "branch " << branch;
        EXPECT_GT(worst, 0.0);
    }
}

TEST(Int8Graph, FloatLayersAndTensorsWithoutParametersStayFp32) {
    const Graph g = testing::int8UnetLevel();
    const Tensor input = testing::seededTensor({1, 2, 16, 14, 12}, 11);
    // Every layer float: the plan of the int8 plan's float precision exactly (fp32, or bf16
    // where cpuInt8FloatPrecision says so).
    const Outcome fp = run(g, input, cpuInt8FloatPrecision());
    auto all_float = calibrateMinMax(g, input);
    for (const auto& c : quant::int8ConvCandidates(g)) all_float->float_layers.push_back(c.node);
    const Outcome same = run(g, input, Precision::kInt8, all_float);
    EXPECT_EQ(countOf(same.describe, "conv int8"), 0) << same.describe;
    EXPECT_EQ(same.out, fp.out);

    // No parameters for the decoder block's input (the concat): that conv stays fp32.
    auto partial = calibrateMinMax(g, input);
    const Graph opt = optimize(g);
    std::string concat_name;
    for (const Node& n : opt.nodes)
        if (n.op == OpKind::kConcat) concat_name = opt.values[n.outputs[0]].name;
    ASSERT_EQ(partial->activations.erase(concat_name), 1u);
    const Outcome fewer = run(g, input, Precision::kInt8, partial);
    EXPECT_EQ(countOf(fewer.describe, "conv int8"), 6) << fewer.describe;
}

TEST(Int8Graph, RefusedWithoutARecordOrWithWeightBitsTheCpuCannotMultiply) {
    const Graph g = convChain();
    CompileOptions options;
    options.precision = Precision::kInt8;
    auto cpu = makeCpuBackend();
    auto none = cpu->compile(g, {{1, 5, 11, 10, 9}}, options);
    ASSERT_FALSE(none.isOk());
    EXPECT_NE(none.status().message().find("quantization"), std::string::npos);
    auto record = std::make_shared<QuantizationRecord>();
    record->activations["x"] = {0.01f, 128};
    record->weight_bits = 8;
    options.quantization = record;
    auto eight = cpu->compile(g, {{1, 5, 11, 10, 9}}, options);
    if (cpuInt8WeightBits(cpuInt8Traits()) == 8) {
        EXPECT_TRUE(eight.isOk()) << eight.status().toString();
    } else {
        ASSERT_FALSE(eight.isOk());
        EXPECT_NE(eight.status().message().find("--weight-bits 7"), std::string::npos)
            << eight.status().message();
    }
    record->weight_bits = 7;
    EXPECT_TRUE(cpu->compile(g, {{1, 5, 11, 10, 9}}, options).isOk());
}

}  // namespace
}  // namespace voxseg::engine
