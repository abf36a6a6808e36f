// oneDNN's int8 convolution (engine/cpu/conv_int8.h) against the exact integer reference
// (engine/quant/int8_conv_reference.h): bit for bit, on every x86 CPU. Weights use the range the
// CPU multiplies exactly (cpuInt8WeightQmax: 127 with VNNI/AMX, 63 without); a further case
// shows what full-range weights do without VNNI (s16 pair saturation, modelled exactly).
// Fixed seeds, odd shapes; every parameter is printed on failure.
#include "engine/cpu/conv_int8.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/quant/int8_conv_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

namespace voxseg::engine {
namespace {

using quant::ActivationQuant;
using quant::Int8Activation;
using quant::Int8ConvSpec;
using quant::Int8Weights;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Case {
    const char* name;
    int64_t ic, oc;
    std::array<int64_t, 3> size, kernel, strides, pads_begin, pads_end;
    bool bias = true;
    Int8Activation act = Int8Activation::kNone;
    int32_t src_zp = 0, dst_zp = 0;
    bool residual = false;
    int64_t batch = 1;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string describe(const Int8ConvSpec& s) {
    auto a = [](const std::array<int64_t, 3>& v) {
        return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
    };
    std::ostringstream os;
    os << "N" << s.batch << " ic " << s.in_channels << " oc " << s.out_channels << " in "
       << a(s.in_size) << " k " << a(s.kernel) << " stride " << a(s.strides) << " pads "
       << a(s.pads_begin) << "/" << a(s.pads_end) << " src zp " << s.src.zero_point << " dst zp "
       << s.dst.zero_point << " bias " << !s.bias.empty() << " act "
       << static_cast<int>(s.activation) << " alpha " << s.alpha << " residual " << s.residual
       << " (scale " << s.residual_scale << ", zp " << s.residual_quant.zero_point << ")";
    return os.str();
}

// One engine for the primitives and the memories they run on (oneDNN checks they match).
const dnnl::engine& cpuEngine() {
    static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

int weightQmaxHere() { return cpuInt8WeightQmax(cpuInt8Traits()); }

// A float convolution's weights and bias, quantised; tensors with the case's zero points.
struct Problem {
    Int8ConvSpec spec;
    Int8Weights weights;
    std::vector<uint8_t> src, residual;
};

Problem makeProblem(const Case& c, uint32_t seed, int qmax) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Problem p;
    Int8ConvSpec& s = p.spec;
    s.batch = c.batch;
    s.in_channels = c.ic;
    s.out_channels = c.oc;
    s.in_size = c.size;
    s.kernel = c.kernel;
    s.strides = c.strides;
    s.pads_begin = c.pads_begin;
    s.pads_end = c.pads_end;
    s.activation = c.act;
    s.alpha = c.act == Int8Activation::kLeakyRelu ? 0.01f : 0.0f;
    std::vector<float> w(c.oc * c.ic * c.kernel[0] * c.kernel[1] * c.kernel[2]);
    for (float& v : w) v = 0.05f * normal(rng);
    p.weights = quant::quantizeWeightsPerChannel(w, c.oc, qmax);
    std::vector<float> bias;
    if (c.bias)
        for (int64_t o = 0; o < c.oc; ++o) bias.push_back(0.3f * normal(rng));
    const ActivationQuant src{0.021f, c.src_zp}, dst{0.047f, c.dst_zp}, res{0.033f, 41};
    quant::setRequantisation(s, src, p.weights.scales, dst, bias, c.residual ? &res : nullptr);
    std::uniform_int_distribution<int> byte(0, 255);
    p.src.resize(static_cast<size_t>(c.batch * c.ic * c.size[0] * c.size[1] * c.size[2]));
    for (uint8_t& v : p.src) v = static_cast<uint8_t>(byte(rng));
    if (c.residual) {
        const auto out = quant::outputSize(s);
        p.residual.resize(static_cast<size_t>(c.batch * c.oc * out[0] * out[1] * out[2]));
        for (uint8_t& v : p.residual) v = static_cast<uint8_t>(byte(rng));
    }
    return p;
}

dnnl::memory::dims dims(int64_t n, int64_t c, const std::array<int64_t, 3>& s) {
    return {n, c, s[0], s[1], s[2]};
}

// Runs the oneDNN int8 conv on plain N C D H W u8 data; returns plain u8 output.
std::vector<uint8_t> runOneDnn(const Int8ConvSpec& s, const cpu::Int8Conv& conv,
                               std::vector<uint8_t> src, std::vector<uint8_t> residual) {
    const dnnl::engine& eng = cpuEngine();
    dnnl::stream stream(eng);
    const auto out = quant::outputSize(s);
    dnnl::memory src_plain({dims(s.batch, s.in_channels, s.in_size), dt::u8, tag::ncdhw}, eng,
                           src.data());
    dnnl::memory src_mem(conv.srcDesc(), eng), dst_mem(conv.dstDesc(), eng);
    dnnl::reorder(src_plain, src_mem).execute(stream, src_plain, src_mem);
    std::vector<uint8_t> dst(
        static_cast<size_t>(s.batch * s.out_channels * out[0] * out[1] * out[2]));
    dnnl::memory dst_plain({dims(s.batch, s.out_channels, out), dt::u8, tag::ncdhw}, eng,
                           dst.data());
    if (s.residual) {
        dnnl::memory res_plain(dst_plain.get_desc(), eng, residual.data());
        dnnl::reorder(res_plain, dst_mem).execute(stream, res_plain, dst_mem);
    }
    conv.execute(stream, src_mem, dst_mem);
    dnnl::reorder(dst_mem, dst_plain).execute(stream, dst_mem, dst_plain);
    stream.wait();
    return dst;
}

// The parity rule: bit for bit. Prints the spec and the first mismatches (with the reference's
// accumulator and unrounded value) on failure; returns the largest difference.
int expectBitExact(const Int8ConvSpec& s, const std::vector<uint8_t>& got,
                   const quant::Int8ReferenceResult& ref, const std::string& what) {
    int max_diff = 0, shown = 0;
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const int d = std::abs(static_cast<int>(got[i]) - static_cast<int>(ref.dst[i]));
        if (d == 0) continue;
        ++mismatches;
        max_diff = std::max(max_diff, d);
        if (shown++ < 5)
            ADD_FAILURE() << what << ": element " << i << " oneDNN " << int(got[i]) << " reference "
                          << int(ref.dst[i]) << " (acc " << ref.acc[i] << ", unrounded "
                          << ref.unrounded[i] << ")\n"
                          << describe(s);
    }
    EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << got.size()
                              << " differ, max " << max_diff << "\n"
                              << describe(s);
    return max_diff;
}

class Int8ConvParity : public ::testing::TestWithParam<Case> {};

TEST_P(Int8ConvParity, OneDnnMatchesTheIntegerReferenceBitForBit) {
    const Case& c = GetParam();
    const Problem p = makeProblem(c, 2026, weightQmaxHere());
    auto conv = cpu::Int8Conv::create(cpuEngine(), p.spec, p.weights);
    ASSERT_TRUE(conv.isOk()) << conv.status().message() << "\n" << describe(p.spec);
    auto ref = quant::int8ConvReference(p.spec, p.src, p.weights.values, p.residual);
    ASSERT_TRUE(ref.isOk()) << ref.status().message();
    const auto got = runOneDnn(p.spec, *conv, p.src, p.residual);
    expectBitExact(p.spec, got, *ref, std::string(c.name) + " [" + conv->implementation() + "]");
    // Not a degenerate case: the outputs spread over the u8 range.
    const auto [lo, hi] = std::minmax_element(ref->dst.begin(), ref->dst.end());
    EXPECT_GE(*hi - *lo, 40) << "outputs barely vary: the case tests little";
}

constexpr std::array<int64_t, 3> k0{0, 0, 0}, k1{1, 1, 1}, k2{2, 2, 2}, k3{3, 3, 3};

// The 13 -> 11 channel, 11x10x9, 3x3x3 convolution with padding 1 that most cases vary.
Case k3Case(const char* name) { return {name, 13, 11, {11, 10, 9}, k3, k1, k1, k1}; }
Case withAct(Case c, Int8Activation act) {
    c.act = act;
    return c;
}
Case withZeroPoints(Case c, int32_t src_zp, int32_t dst_zp) {
    c.src_zp = src_zp;
    c.dst_zp = dst_zp;
    return c;
}
Case withResidual(Case c) {
    c.residual = true;
    return c;
}

Case withBatch(Case c, int64_t batch) {
    c.batch = batch;
    return c;
}

const Case kCases[] = {
    k3Case("k3_pad1"),
    {"k1_pointwise", 13, 11, {11, 10, 9}, k1, k1, k0, k0},
    {"k5_pad2", 5, 7, {9, 8, 7}, {5, 5, 5}, k1, k2, k2},
    {"k3_stride2", 13, 16, {11, 10, 9}, k3, k2, k1, k1},
    {"k2_stride2_nopad", 8, 11, {10, 8, 6}, k2, k2, k0, k0},
    {"k1x3x3_s1x2x2_asym_pad", 7, 9, {5, 10, 9}, {1, 3, 3}, {1, 2, 2}, {0, 1, 0}, {0, 0, 1}},
    withAct(k3Case("relu"), Int8Activation::kRelu),
    withZeroPoints(withAct(k3Case("leaky_relu_signed_src"), Int8Activation::kLeakyRelu), 97, 23),
    withZeroPoints({"no_bias_dst_zero_point", 6, 10, {7, 6, 5}, k3, k1, k1, k1, false}, 0, 128),
    withResidual(k3Case("residual_add")),
    withZeroPoints(withResidual(withAct({"residual_leaky_zp", 16, 16, {9, 9, 9}, k3, k1, k1, k1},
                                        Int8Activation::kLeakyRelu)),
                   60, 30),
    withBatch(withResidual(withAct({"k1_residual_relu_n2", 24, 32, {6, 5, 4}, k1, k1, k0, k0},
                                   Int8Activation::kRelu)),
              2),
    withZeroPoints(
        withAct({"wide_32_to_32", 32, 32, {8, 7, 6}, k3, k1, k1, k1}, Int8Activation::kLeakyRelu),
        11, 0),
};

INSTANTIATE_TEST_SUITE_P(Cases, Int8ConvParity, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The parity check can fail: a 1 % change of one channel's output scale in the reference is
// seen. (A wrong scale rule in int8_conv_reference.cpp or conv_int8.cpp shows up the same way.)
// Halo sources (quant::foldSourceZeroPointIntoHalo, int8_policy.h): the same convolution run
// unpadded on its source inside a halo of the zero point, without a source zero point (oneDNN's
// brgconv on AMX), equals its integer reference bit for bit and the padded zero-point
// convolution's result within one step where the folded bias rounds differently (counted).
TEST(Int8ConvParity, HaloSourcesEqualTheZeroPointConvolution) {
    Case stride2 = withZeroPoints(k3Case("halo_stride2"), 77, 9);
    stride2.strides = k2;
    const Case cases[] = {
        withZeroPoints(withAct(k3Case("halo_leaky"), Int8Activation::kLeakyRelu), 97, 23),
        withZeroPoints(withResidual(withAct({"halo_residual", 16, 16, {9, 9, 9}, k3, k1, k1, k1},
                                            Int8Activation::kLeakyRelu)),
                       60, 30),
        withZeroPoints(
            withAct({"halo_32", 32, 32, {8, 7, 6}, k3, k1, k1, k1}, Int8Activation::kLeakyRelu), 11,
            0),
        stride2,
        withZeroPoints({"halo_asym", 7, 9, {5, 10, 9}, {1, 3, 3}, {1, 2, 2}, {0, 1, 0}, {0, 0, 1}},
                       130, 0),
        withBatch(withZeroPoints(withAct({"halo_batch2", 16, 16, {6, 7, 5}, k3, k1, k1, k1},
                                         Int8Activation::kRelu),
                                 201, 4),
                  2),
    };
    for (const Case& c : cases) {
        const Problem p = makeProblem(c, 2031, weightQmaxHere());
        auto padded = quant::int8ConvReference(p.spec, p.src, p.weights.values, p.residual);
        ASSERT_TRUE(padded.isOk()) << padded.status().message();
        Int8ConvSpec h = p.spec;
        ASSERT_TRUE(quant::foldSourceZeroPointIntoHalo(h, p.weights)) << c.name;
        EXPECT_EQ(h.src.zero_point, 0);
        EXPECT_EQ(quant::outputSize(h), quant::outputSize(p.spec));
        // The source inside its halo (plain N C D H W).
        const auto& in = p.spec.in_size;
        std::vector<uint8_t> src(
            static_cast<size_t>(c.batch * c.ic * h.in_size[0] * h.in_size[1] * h.in_size[2]),
            static_cast<uint8_t>(c.src_zp));
        for (int64_t nc = 0; nc < c.batch * c.ic; ++nc)
            for (int64_t z = 0; z < in[0]; ++z)
                for (int64_t y = 0; y < in[1]; ++y)
                    for (int64_t x = 0; x < in[2]; ++x)
                        src[static_cast<size_t>(
                            ((nc * h.in_size[0] + z + c.pads_begin[0]) * h.in_size[1] + y +
                             c.pads_begin[1]) *
                                h.in_size[2] +
                            x + c.pads_begin[2])] =
                            p.src[static_cast<size_t>(((nc * in[0] + z) * in[1] + y) * in[2] + x)];
        auto ref = quant::int8ConvReference(h, src, p.weights.values, p.residual);
        ASSERT_TRUE(ref.isOk()) << ref.status().message();
        auto conv = cpu::Int8Conv::create(cpuEngine(), h, p.weights);
        ASSERT_TRUE(conv.isOk()) << conv.status().message() << "\n" << describe(h);
        const auto got = runOneDnn(h, *conv, src, p.residual);
        expectBitExact(h, got, *ref, std::string(c.name) + " [" + conv->implementation() + "]");
        size_t differ = 0;
        int worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            const int d = std::abs(int(got[i]) - int(padded->dst[i]));
            differ += d != 0;
            worst = std::max(worst, d);
        }
        std::printf("%s [%s]: %zu of %zu outputs differ from the zero-point convolution\n", c.name,
                    conv->implementation().c_str(), differ, got.size());
        EXPECT_LE(worst, 1) << c.name;
        EXPECT_LE(differ * 1000, got.size()) << c.name;  // at most 0.1 %
    }
}

TEST(Int8ConvParityCheck, SeesAOnePercentScaleChange) {
    const Problem p = makeProblem(kCases[0], 2026, weightQmaxHere());
    auto conv = cpu::Int8Conv::create(cpuEngine(), p.spec, p.weights);
    ASSERT_TRUE(conv.isOk());
    Int8ConvSpec wrong = p.spec;
    wrong.output_scales[3] *= 1.01f;
    auto ref = quant::int8ConvReference(wrong, p.src, p.weights.values, p.residual);
    ASSERT_TRUE(ref.isOk());
    const auto got = runOneDnn(p.spec, *conv, p.src, p.residual);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != ref->dst[i];
    EXPECT_GT(differ, 10u);
}

// 8-bit normalisation inputs (int8_scheme.h): the convolution writes s8 with one scale per output
// channel, no zero point, bit for bit as the reference rounds it to [-128, 127]; with and without
// the bias (InstanceNorm cancels it, so such a convolution drops it).
TEST(Int8ConvParity, EightBitNormalisationInputsPerChannelBitForBit) {
    for (const bool bias : {true, false}) {
        Case c = k3Case("s8_per_channel");
        c.bias = bias;
        c.src_zp = 97;
        Problem p = makeProblem(c, 2027, weightQmaxHere());
        std::vector<float> dst_scales(static_cast<size_t>(c.oc));
        for (size_t o = 0; o < dst_scales.size(); ++o) dst_scales[o] = 0.004f * float(o + 1);
        std::vector<float> bias_f32;  // back to float units, as the plan passes it
        for (size_t o = 0; o < p.spec.bias.size(); ++o)
            bias_f32.push_back(p.spec.bias[o] * p.spec.src.scale * p.weights.scales[o]);
        quant::setRequantisationS8(p.spec, p.spec.src, p.weights.scales, dst_scales, bias_f32);
        ASSERT_TRUE(quant::validate(p.spec).isOk());
        auto conv = cpu::Int8Conv::create(cpuEngine(), p.spec, p.weights);
        ASSERT_TRUE(conv.isOk()) << conv.status().message();
        ASSERT_EQ(conv->dstDesc().data_type(), dt::s8);
        auto ref = quant::int8ConvReference(p.spec, p.src, p.weights.values, {});
        ASSERT_TRUE(ref.isOk()) << ref.status().message();
        const dnnl::engine& eng = cpuEngine();
        dnnl::stream stream(eng);
        const auto out = quant::outputSize(p.spec);
        dnnl::memory src_plain({dims(1, c.ic, c.size), dt::u8, tag::ncdhw}, eng, p.src.data());
        dnnl::memory src_mem(conv->srcDesc(), eng), dst_mem(conv->dstDesc(), eng);
        dnnl::reorder(src_plain, src_mem).execute(stream, src_plain, src_mem);
        std::vector<int8_t> got(ref->dst_s8.size());
        dnnl::memory dst_plain({dims(1, c.oc, out), dt::s8, tag::ncdhw}, eng, got.data());
        conv->execute(stream, src_mem, dst_mem);
        dnnl::reorder(dst_mem, dst_plain).execute(stream, dst_mem, dst_plain);
        stream.wait();
        size_t differ = 0, saturated = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            differ += got[i] != ref->dst_s8[i];
            saturated += ref->dst_s8[i] == 127 || ref->dst_s8[i] == -128;
        }
        EXPECT_EQ(differ, 0u) << "bias " << bias << " [" << conv->implementation() << "]";
        EXPECT_GT(saturated, 0u) << "no output saturates: the clamp is not exercised";
        const auto [lo, hi] = std::minmax_element(ref->dst_s8.begin(), ref->dst_s8.end());
        EXPECT_LT(*lo, -60);
        EXPECT_GT(*hi, 60);
    }
}

// Full-range (8-bit) weights: exact with VNNI (vpdpbusd adds 4 products into s32); without it
// AVX2's vpmaddubsw adds the products of input channels 2k, 2k+1 into a saturating s16, and
// oneDNN's result is the pair-saturation model's, bit for bit, and not the exact one. This is
// why weights are 7-bit (quant::kWeightQmaxNoVnni) on such CPUs.
TEST(Int8ConvParity, FullRangeWeightsSaturateInPairsWithoutVnniExactlyAsModelled) {
    const Case c{"full_range", 13, 11, {9, 8, 7}, k3, k1, k1, k1};
    const Problem p = makeProblem(c, 99, quant::kWeightQmaxVnni);
    auto conv = cpu::Int8Conv::create(cpuEngine(), p.spec, p.weights);
    ASSERT_TRUE(conv.isOk());
    const auto got = runOneDnn(p.spec, *conv, p.src, p.residual);
    auto exact = quant::int8ConvReference(p.spec, p.src, p.weights.values, p.residual);
    auto paired = quant::int8ConvReference(p.spec, p.src, p.weights.values, p.residual, {true});
    ASSERT_TRUE(exact.isOk() && paired.isOk());
    ASSERT_GT(paired->saturated_pairs, 100) << "the case must saturate without VNNI";
    const bool vnni = cpuInt8WeightBits(cpuInt8Traits()) == 8;
    expectBitExact(p.spec, got, vnni ? *exact : *paired,
                   std::string(vnni ? "VNNI: exact" : "no VNNI: s16 pairs") + " [" +
                       conv->implementation() + "]");
    size_t changed = 0;
    int max_change = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const int d = std::abs(static_cast<int>(paired->dst[i]) - static_cast<int>(exact->dst[i]));
        changed += d != 0;
        max_change = std::max(max_change, d);
    }
    std::printf(
        "full-range weights: %lld s16 pair sums saturate without VNNI; %zu of %zu outputs "
        "change, by up to %d\n",
        static_cast<long long>(paired->saturated_pairs), changed, got.size(), max_change);
    EXPECT_GT(changed, 0u) << "saturation changed no output: the case is too weak";
}

}  // namespace
}  // namespace voxseg::engine
