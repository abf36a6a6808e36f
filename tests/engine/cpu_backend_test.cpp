// oneDNN CPU backend: what the op-parity table (test_op_parity) does not check on its own:
// multi-layer graphs (fusion + blocked-layout propagation + buffer reuse) against the unfused
// reference backend, the bf16 path, the arena planner, and error messages.
#include "engine/cpu/cpu_backend.h"

#include "core/memory_limit.h"
#include "core/process_metrics.h"
#include "engine/cpu/attention.h"
#include "engine/cpu/attention_softmax.h"
#include "engine/cpu/norm_kernels.h"
#include "engine/cpu/plan.h"
#include "engine/passes/optimize.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>
#include <string>

#include <unistd.h>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

// One nnU-Net encoder/decoder level with odd sizes: (conv3 -> InstanceNorm -> LeakyReLU) x2,
// strided conv down, the same block, ConvTranspose up, concat with the skip, block, 1x1 head.
Graph unetLevel(int64_t in_ch, int64_t f0, int64_t f1, int64_t out_ch) {
    GraphBuilder b;
    auto block = [&](ValueId x, int64_t cin, int64_t cout, std::vector<int64_t> s) {
        ValueId y = b.conv(x, cin, cout, {3, 3, 3}, s, {1, 1, 1, 1, 1, 1});
        y = b.norm(OpKind::kInstanceNorm, y, cout);
        y = b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
        y = b.conv(y, cout, cout, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
        y = b.norm(OpKind::kInstanceNorm, y, cout);
        return b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
    };
    const ValueId x = b.input("x", {1, in_ch, 16, 14, 12});
    const ValueId skip = block(x, in_ch, f0, {1, 1, 1});
    const ValueId down = block(skip, f0, f1, {2, 2, 2});
    const ValueId up = b.convTranspose(down, f1, f0, {2, 2, 2}, {2, 2, 2});
    const ValueId cat = b.node(OpKind::kConcat, {skip, up}, [](Node& n) { n.axis = 1; });
    const ValueId dec = block(cat, 2 * f0, f0, {1, 1, 1});
    b.output(b.conv(dec, f0, out_ch, {1, 1, 1}));
    return b.graph();
}

struct RunResult {
    std::vector<Tensor> outputs;
    std::string describe;
    size_t workspace = 0;
};

RunResult runOn(Backend& backend, const Graph& g, const std::vector<Shape>& shapes,
                Precision precision) {
    RunResult r;
    CompileOptions opt;
    opt.precision = precision;
    auto exe = backend.compile(g, shapes, opt);
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe.isOk()) return r;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < shapes.size(); ++i)
        inputs.push_back(testing::seededTensor(shapes[i], 7u + static_cast<uint32_t>(i)));
    const Status s = (*exe)->run(inputs, r.outputs);
    EXPECT_TRUE(s.isOk()) << s.toString();
    r.describe = (*exe)->describe();
    r.workspace = (*exe)->workspaceBytes();
    return r;
}

int countOf(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

// The first output of `got` against `want`'s within `tol`; a failure prints what the plan ran.
void expectMatches(const RunResult& got, const RunResult& want, const testing::Tolerance& tol) {
    const auto cmp = testing::compareTensors(got.outputs[0], want.outputs[0], tol);
    EXPECT_LE(cmp.worst_ratio, 1.0) << "max abs error " << cmp.max_abs << "\n" << got.describe;
}

TEST(CpuBackend, UnetLevelMatchesUnfusedReferenceWithBlockedLayoutsAndReuse) {
    const Graph g = unetLevel(2, 16, 32, 3);
    const std::vector<Shape> shapes = {{1, 2, 16, 14, 12}};
    auto reference = makeReferenceBackend();
    auto cpu = makeCpuBackend();
    const RunResult want = runOn(*reference, g, shapes, Precision::kFloat32);
    const RunResult got = runOn(*cpu, g, shapes, Precision::kFloat32);
    ASSERT_EQ(got.outputs.size(), 1u);
    expectMatches(got, want, testing::kNetworkTol.fp32);

    // Fusion: every LeakyReLU went into its InstanceNorm (no eltwise step left).
    EXPECT_EQ(countOf(got.describe, "eltwise"), 0) << got.describe;
    EXPECT_EQ(countOf(got.describe, "instancenorm"), 6) << got.describe;
    EXPECT_EQ(countOf(got.describe, "instancenorm ncdhw"), 0) << got.describe;
    // Layout: the layers chain in the layout the convolutions chose (ndhwc or nCdhw16c), the
    // first conv reads the plain input and the concat writes its inputs' layout: one reorder,
    // at the output (oneDNN's own choice of concat output took a second one before the conv).
    EXPECT_EQ(countOf(got.describe, "reorder"), 1) << got.describe;
    // Buffer reuse: the arena is smaller than the sum of the activations it holds.
    size_t total = 0;
    Graph shaped = optimize(g);
    ASSERT_TRUE(shaped.inferShapes(shapes).isOk());
    for (const Node& n : shaped.nodes)
        for (ValueId v : n.outputs) total += numel(shaped.values[v].shape) * sizeof(float);
    EXPECT_GT(got.workspace, 0u);
    EXPECT_LT(got.workspace, total / 2) << "workspace " << got.workspace << " of " << total;
}

// releaseWorkspace (between a staged package's networks): the arena's pages leave the process
// (resident memory drops by most of the workspace) and the next run, which faults them in again,
// gives the same outputs bit for bit.
TEST(CpuBackend, ReleasedWorkspaceLeavesAndTheNextRunIsTheSame) {
    const Graph g = unetLevel(2, 16, 32, 3);
    const std::vector<Shape> shapes = {{1, 2, 48, 48, 48}};
    auto cpu = makeCpuBackend();
    CompileOptions opt;
    opt.precision = Precision::kFloat32;
    auto exe = cpu->compile(g, shapes, opt);
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    const std::vector<Tensor> inputs = {testing::seededTensor(shapes[0], 7u)};
    std::vector<Tensor> first, second;
    ASSERT_TRUE((*exe)->run(inputs, first).isOk());
    const double workspace_mib = static_cast<double>((*exe)->workspaceBytes()) / (1 << 20);
    ASSERT_GT(workspace_mib, 8.0);
    const double before = currentRssMib();
    (*exe)->releaseWorkspace();
    const double after = currentRssMib();
    EXPECT_GT(before - after, 0.5 * workspace_mib)
        << "rss " << before << " -> " << after << " MiB, workspace " << workspace_mib << " MiB";
    ASSERT_TRUE((*exe)->run(inputs, second).isOk());
    ASSERT_EQ(first.size(), second.size());
    ASSERT_EQ(first[0].numel(), second[0].numel());
    EXPECT_EQ(std::memcmp(first[0].raw(), second[0].raw(), first[0].numel() * sizeof(float)), 0);
}

// A compiled network holds its weights once: the plan's reordered copies. When the caller's
// graph goes (a Segmenter keeps only the compiled networks), its weights leave the process (64 MiB
// here, above glibc's largest mmap threshold, so freeing them unmaps them) and the network still
// runs, bit for bit as before.
TEST(CpuBackend, CompiledNetworkKeepsNoSecondCopyOfTheWeights) {
    constexpr int64_t kChannels = 4096;  // 1x1x1 conv: 4096 x 4096 float weights, 64 MiB
    std::optional<Graph> g;
    {
        GraphBuilder b;
        const ValueId x = b.input("x", {1, kChannels, 2, 2, 2});
        b.output(b.conv(x, kChannels, kChannels, {1, 1, 1}));
        g = b.graph();
    }
    const std::vector<Shape> shapes = {{1, kChannels, 2, 2, 2}};
    auto cpu = makeCpuBackend();
    CompileOptions opt;
    opt.precision = Precision::kFloat32;
    auto exe = cpu->compile(*g, shapes, opt);
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    const std::vector<Tensor> inputs = {testing::seededTensor(shapes[0], 3u)};
    std::vector<Tensor> first, second;
    ASSERT_TRUE((*exe)->run(inputs, first).isOk());
    const double before = currentRssMib();
    g.reset();
    const double after = currentRssMib();
    bool asan = false;  // AddressSanitizer keeps freed memory in its quarantine
#if defined(__SANITIZE_ADDRESS__)
    asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    asan = true;
#endif
#endif
    if (!asan)
        EXPECT_GT(before - after, 0.8 * 64.0) << "rss " << before << " -> " << after << " MiB";
    ASSERT_TRUE((*exe)->run(inputs, second).isOk());
    ASSERT_EQ(first[0].numel(), second[0].numel());
    EXPECT_EQ(std::memcmp(first[0].raw(), second[0].raw(), first[0].numel() * sizeof(float)), 0);
}

// Under DNNL_MAX_CPU_ISA=AVX2 or SSE41 (ctest's test_cpu_backend_cpu_as_avx2 / _as_sse41)
// voxseg's own kernels take their AVX2 build or their portable loops as oneDNN takes its
// kernels for that ISA; with AVX2, no sub-pixel ConvTranspose falls to oneDNN's reference
// convolution: 16-channel blocks have no AVX2 kernel (8-channel blocks, then for 2 classes the
// gather from 8-channel blocks of the K x OC values).
TEST(CpuBackend, IsaCapReachesOurKernelsAndConvTransposeKeepsFastKernels) {
    const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
    const std::string isa = cap ? cap : "";
    if (isa != "AVX2" && isa != "SSE41")
        GTEST_SKIP() << "runs under DNNL_MAX_CPU_ISA=AVX2 or SSE41 (ctest *_cpu_as_avx2, _sse41)";
    const char* want = isa == "AVX2" ? "avx2" : "generic";
    EXPECT_STREQ(cpu::normKernelIsa(), want);
    EXPECT_STREQ(cpu::softmaxIsa(), want);
    if (isa != "AVX2") return;
    auto reference = makeReferenceBackend();
    auto cpu = makeCpuBackend();
    for (const int64_t oc : {16, 8, 2}) {
        SCOPED_TRACE("ConvTranspose to " + std::to_string(oc) + " channels");
        GraphBuilder b;
        const ValueId x = b.input("x", {1, 5, 6, 7, 5});
        const ValueId y = b.conv(x, 5, 12, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
        b.output(b.convTranspose(y, 12, oc, {2, 2, 2}, {2, 2, 2}));
        const std::vector<Shape> shapes = {{1, 5, 6, 7, 5}};
        const RunResult want = runOn(*reference, b.graph(), shapes, Precision::kFloat32);
        const RunResult got = runOn(*cpu, b.graph(), shapes, Precision::kFloat32);
        expectMatches(got, want, testing::kNetworkTol.fp32);
        EXPECT_EQ(countOf(got.describe, "ref:"), 0) << got.describe;
        EXPECT_EQ(countOf(got.describe, ":avx2 "), 2) << got.describe;  // both convolutions
    }
}

// A segmentation head as deepbet's LinkNet3d ends: a channels-last conv, ConvTranspose k2 s2
// to 2 classes (not a multiple of 8: the 1x1 conv writes channels-last, or with AVX2 8-channel
// blocks, and the gather makes the plain output) and Softmax over the channels (the channel loop,
// not oneDNN's reference softmax), with more than one run of 512 positions per channel and a batch
// of 2. In bf16 plans too: oneDNN 2.6's bf16 softmax over the channels is its reference kernel (4.0
// of 4.6 s of deepbet's network), so the loop runs on the f32 copy.
TEST(CpuBackend, TwoClassUpsamplingHeadWithSoftmaxMatchesReference) {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 5, 9, 10, 11});
    ValueId y = b.conv(x, 5, 12, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    y = b.node(OpKind::kRelu, {y});
    y = b.convTranspose(y, 12, 2, {2, 2, 2}, {2, 2, 2});
    b.output(b.node(OpKind::kSoftmax, {y}, [](Node& n) { n.axis = 1; }));
    const Graph g = b.graph();
    const std::vector<Shape> shapes = {{2, 5, 9, 10, 11}};
    auto reference = makeReferenceBackend();
    auto cpu = makeCpuBackend();
    const RunResult want = runOn(*reference, g, shapes, Precision::kFloat32);
    const RunResult got = runOn(*cpu, g, shapes, Precision::kFloat32);
    ASSERT_EQ(got.outputs.size(), 1u);
    ASSERT_EQ(got.outputs[0].shape(), (Shape{2, 2, 18, 20, 22}));
    expectMatches(got, want, testing::kNetworkTol.fp32);
    EXPECT_EQ(countOf(got.describe, "softmax channel loop"), 1) << got.describe;
    const bool avx512 = cpu::kernelIsa() == cpu::KernelIsa::kAvx512;
    EXPECT_EQ(countOf(got.describe, avx512 ? "scatter ndhwc" : "scatter nCdhw8c"), 1)
        << got.describe;
    EXPECT_EQ(countOf(got.describe, "gemm"), 0) << got.describe;
    if (!cpu->supportsPrecision(Precision::kBFloat16))
        GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu->deviceDescription();
    const RunResult bf16 = runOn(*cpu, g, shapes, Precision::kBFloat16);
    ASSERT_EQ(bf16.outputs.size(), 1u);
    expectMatches(bf16, want, testing::kNetworkTol.bf16);
    EXPECT_EQ(countOf(bf16.describe, "softmax channel loop"), 1) << bf16.describe;
    EXPECT_EQ(countOf(bf16.describe, "ref:"), 0) << bf16.describe;
}

// A bf16 plan computes a convolution of at most 4 input channels (a network's first, on the
// image) in fp32 (conv.cpp, convComputeType): AMX's bf16 kernel pads one channel to 32. Such a
// convolution alone gives the fp32 plan's result exactly.
TEST(CpuBackend, Bf16PlansKeepTheFewChannelFirstConvolutionInFp32) {
    auto cpu = makeCpuBackend();
    if (!cpu->supportsPrecision(Precision::kBFloat16))
        GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu->deviceDescription();
    for (int64_t in_ch : {1, 4, 5}) {
        GraphBuilder b;
        const ValueId x = b.input("x", {1, in_ch, 17, 18, 19});
        b.output(b.conv(x, in_ch, 32, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}));
        const Graph g = b.graph();
        const std::vector<Shape> shapes = {{1, in_ch, 17, 18, 19}};
        const RunResult fp32 = runOn(*cpu, g, shapes, Precision::kFloat32);
        const RunResult bf16 = runOn(*cpu, g, shapes, Precision::kBFloat16);
        ASSERT_EQ(bf16.outputs.size(), 1u);
        const auto cmp =
            testing::compareTensors(bf16.outputs[0], fp32.outputs[0], testing::Tolerance{0.0, 0.0});
        if (in_ch <= 4) {
            EXPECT_EQ(cmp.max_abs, 0.0) << in_ch << " channels\n" << bf16.describe;
            EXPECT_EQ(countOf(bf16.describe, ":bf16"), 0) << bf16.describe;
        } else {  // 5 channels: bf16 as before
            EXPECT_GT(cmp.max_abs, 0.0) << bf16.describe;
            EXPECT_GT(countOf(bf16.describe, ":bf16"), 0) << bf16.describe;
        }
    }
    // In a network (2 input channels: the first conv fp32, the rest bf16):
    // UnetLevelBf16WithinStatedTolerance.
}

// Up-sampling to 24 channels (a multiple of 8, not of 16: Primus-S's second decoder stage). In
// bf16 oneDNN 2.6 has only its reference kernel for 8-channel blocks, which took 1.07 of 1.9 s
// of a bf16 Primus-S patch: the 1x1 convolution writes channels-last instead and the scatter
// moves each voxel's 24 values; fp32 keeps its 8-channel blocks.
TEST(CpuBackend, UpsamplingToEightBlockChannelsAvoidsReferenceKernelsInBf16) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 32, 5, 6, 7});
    ValueId y = b.conv(x, 32, 32, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0});
    y = b.convTranspose(y, 32, 24, {2, 2, 2}, {2, 2, 2});
    b.output(b.node(OpKind::kRelu, {y}));
    const Graph g = b.graph();
    const std::vector<Shape> shapes = {{1, 32, 5, 6, 7}};
    auto reference = makeReferenceBackend();
    auto cpu = makeCpuBackend();
    const RunResult want = runOn(*reference, g, shapes, Precision::kFloat32);
    const RunResult fp32 = runOn(*cpu, g, shapes, Precision::kFloat32);
    ASSERT_EQ(fp32.outputs.size(), 1u);
    ASSERT_EQ(fp32.outputs[0].shape(), (Shape{1, 24, 10, 12, 14}));
    expectMatches(fp32, want, testing::kNetworkTol.fp32);
    // 24 output channels: an 8-channel-block tmp, or channels-last where the 1x1 conv before it
    // wrote channels-last (brgconv_1x1 on AVX-512 Xeons); never a reference kernel.
    EXPECT_EQ(countOf(fp32.describe, "ref:"), 0) << fp32.describe;
    EXPECT_EQ(countOf(fp32.describe, "scatter nCdhw8c:f32->nCdhw8c:f32") +
                  countOf(fp32.describe, "scatter ndhwc:f32->ndhwc:f32"),
              1)
        << fp32.describe;
    if (!cpu->supportsPrecision(Precision::kBFloat16))
        GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu->deviceDescription();
    const RunResult bf16 = runOn(*cpu, g, shapes, Precision::kBFloat16);
    ASSERT_EQ(bf16.outputs.size(), 1u);
    expectMatches(bf16, want, testing::kNetworkTol.bf16);
    EXPECT_EQ(countOf(bf16.describe, "ref:"), 0) << bf16.describe;
    EXPECT_EQ(countOf(bf16.describe, "scatter ndhwc:bf16->ndhwc:bf16"), 1) << bf16.describe;
}

// VOXSEG_CPU_ATTENTION set for one scope (both attention forms run on every CPU in these tests,
// whichever the policy picks there).
class ScopedAttentionForm {
  public:
    explicit ScopedAttentionForm(const char* form) {
        if (const char* old = std::getenv("VOXSEG_CPU_ATTENTION")) old_ = old;
        ::setenv("VOXSEG_CPU_ATTENTION", form, 1);
    }
    ~ScopedAttentionForm() {
        if (old_)
            ::setenv("VOXSEG_CPU_ATTENTION", old_->c_str(), 1);
        else
            ::unsetenv("VOXSEG_CPU_ATTENTION");
    }

  private:
    std::optional<std::string> old_;
};

// The policy: the columns form for part-filled value vectors, except bf16 on AMX; the
// override names either form.
TEST(CpuBackend, AttentionFormPolicy) {
    using cpu::attention::Form;
    for (bool bf16 : {false, true})
        for (bool amx : {false, true}) {
            // Primus' 66-wide heads: columns, except bf16 on AMX
            EXPECT_EQ(cpu::attention::attentionForm(bf16, amx, 66),
                      bf16 && amx ? Form::kRows : Form::kColumns)
                << bf16 << amx;
            // Swin's and UNETR's heads fill whole vectors: rows
            for (int64_t dv : {16, 32, 64})
                EXPECT_EQ(cpu::attention::attentionForm(bf16, amx, dv), Form::kRows) << dv;
        }
    {
        ScopedAttentionForm rows("rows");
        EXPECT_EQ(cpu::attention::attentionFormOverride(), Form::kRows);
    }
    {
        ScopedAttentionForm columns("columns");
        EXPECT_EQ(cpu::attention::attentionFormOverride(), Form::kColumns);
    }
    ScopedAttentionForm other("diagonal");
    EXPECT_EQ(cpu::attention::attentionFormOverride(), std::nullopt);
}

// Both forms against the reference on the parity table's attention cases with biases (Swin's
// window mask, broadcast masks), strided heads, query blocks with a tail, and too few blocks to
// spread over the threads (attention_fused_bias: 3 items of one block), in fp32 and (where the
// CPU has it) bf16; the table itself runs the form the policy picks.
TEST(CpuBackend, BothAttentionFormsMatchTheReference) {
    auto cpu = makeCpuBackend();
    auto reference = makeReferenceBackend();
    std::vector<Precision> precisions = {Precision::kFloat32};
    if (cpu->supportsPrecision(Precision::kBFloat16)) precisions.push_back(Precision::kBFloat16);
    int ran = 0;
    for (const testing::OpCase& c : testing::allOpCases()) {
        if (c.name != "attention_fused_bias" && c.name != "attention_fused_blocked_tail" &&
            c.name != "attention_fused_window_mask" &&
            c.name != "mha_packed_heads_bias_blocked_tail" &&
            c.name != "attention_heads_pattern_primus")
            continue;
        const RunResult want = runOn(*reference, c.graph, c.input_shapes, Precision::kFloat32);
        for (const char* form : {"rows", "columns"}) {
            ScopedAttentionForm scoped(form);
            for (Precision p : precisions) {
                SCOPED_TRACE(c.name + " " + form + " " + precisionName(p));
                const RunResult got = runOn(*cpu, c.graph, c.input_shapes, p);
                ASSERT_EQ(got.outputs.size(), 1u);
                expectMatches(got, want, c.tol.at(p));
                EXPECT_EQ(countOf(got.describe, std::string(", softmax ") + form + " "), 1)
                    << got.describe;
                ++ran;
            }
        }
    }
    EXPECT_EQ(ran, 5 * 2 * static_cast<int>(precisions.size()));
}

// Keys so many that not even 16 query columns of scores fit the block budget (the columns form
// takes 16 anyway, the rows form fewer rows than 16), with a mask, 2 heads of 66 (Primus') and
// a query count with a tail in both forms.
TEST(CpuBackend, BothAttentionFormsTakeKeysBeyondTheScoresBlock) {
    auto cpu = makeCpuBackend();
    auto reference = makeReferenceBackend();
    const int64_t tq = 37, tk = 33000, heads = 2, d = 66;
    ASSERT_LT(cpu::attention::scoresBlockBytes() / (4 * tk), 16);
    GraphBuilder b;
    const Shape qs{1, tq, heads * d}, ks{1, tk, heads * d}, ms{1, 1, tq, tk};
    std::vector<float> mask(static_cast<size_t>(numel(ms)));
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7) % 5 == 0 ? -100.0f : 0.0f;
    std::vector<ValueId> in{b.input("q", qs), b.input("k", ks), b.input("v", ks),
                            b.constant("mask", Tensor::fromFloats(ms, mask))};
    b.output(b.node(OpKind::kMultiHeadAttention, in, [&](Node& n) {
        n.attention_scale = 0.12f;
        n.attention_heads = heads;
    }));
    const Graph g = b.graph();
    const RunResult want = runOn(*reference, g, {qs, ks, ks}, Precision::kFloat32);
    for (const char* form : {"rows", "columns"}) {
        ScopedAttentionForm scoped(form);
        const RunResult got = runOn(*cpu, g, {qs, ks, ks}, Precision::kFloat32);
        ASSERT_EQ(got.outputs.size(), 1u);
        expectMatches(got, want, testing::kMatMulTol.fp32);
        EXPECT_EQ(countOf(got.describe, std::string(", softmax ") + form + " "), 1) << got.describe;
        // blocks of 16 query columns, or of the query rows that fit (fewer than 16)
        const int64_t rows = std::max<int64_t>(cpu::attention::scoresBlockBytes() / (4 * tk), 1);
        const std::string blocks = std::string(form) == "columns"
                                       ? "blocked 33000x16 "
                                       : "blocked " + std::to_string(rows) + "x33000 ";
        EXPECT_EQ(countOf(got.describe, blocks), 1) << got.describe;
    }
}

// bf16 plans multiply attention's two products in bf16 (AMX where the CPU has it), the softmax
// writing P in bf16; 300 query rows of 300 keys have a tail block in both forms.
TEST(CpuBackend, AttentionRunsItsProductsInBf16InBf16Plans) {
    auto cpu = makeCpuBackend();
    if (!cpu->supportsPrecision(Precision::kBFloat16))
        GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu->deviceDescription();
    GraphBuilder b;
    const Shape qs{1, 2, 300, 24}, ks{1, 2, 24, 300}, vs{1, 2, 300, 20};
    const ValueId q = b.input("q", qs), kt = b.input("kt", ks), v = b.input("v", vs);
    b.output(b.node(OpKind::kAttention, {q, kt, v}, [](Node& n) { n.attention_scale = 0.2f; }));
    const Graph g = b.graph();
    auto reference = makeReferenceBackend();
    const RunResult want = runOn(*reference, g, {qs, ks, vs}, Precision::kFloat32);
    for (const char* form : {"rows", "columns"}) {
        ScopedAttentionForm scoped(form);
        const RunResult got = runOn(*cpu, g, {qs, ks, vs}, Precision::kBFloat16);
        ASSERT_EQ(got.outputs.size(), 1u);
        expectMatches(got, want, testing::kNetworkTol.bf16);
        EXPECT_EQ(countOf(got.describe, std::string(", softmax ") + form + " "), 1) << got.describe;
        EXPECT_EQ(countOf(got.describe, " bf16, softmax"), 1) << got.describe;
        EXPECT_EQ(countOf(got.describe, "f32->bf16"), 1) << got.describe;
        EXPECT_EQ(countOf(got.describe, "ref:"), 0) << got.describe;
    }
}

// bf16 plans: a LayerNorm read only by MatMuls writes their bf16 operand itself (no reorder
// after it); one that something else reads as well stays oneDNN's f32 layer normalisation.
// Odd sizes: 13 tokens of 37 values (vector tails), with and without bias.
// Packed heads ([B, T, H x D]) tile one head's rotary tables H times; the kernel reads one
// head's table then, and the whole table where the tables do not share a period.
TEST(CpuBackend, RotaryReadsOneHeadsTableWhereTheHeadsShareIt) {
    const int64_t T = 13, D = 10, H = 3;
    auto tiled = [&](uint32_t seed) {
        const std::vector<float> head = testing::seededTensor({T, D}, seed).toFloats();
        std::vector<float> t;
        for (int64_t i = 0; i < T; ++i)
            for (int64_t h = 0; h < H; ++h)
                t.insert(t.end(), head.begin() + i * D, head.begin() + (i + 1) * D);
        return Tensor::fromFloats({T, H * D}, t);
    };
    const Shape s{2, T, H * D};
    for (const bool shared : {true, false}) {
        SCOPED_TRACE(shared ? "tables tiled per head" : "sin not tiled");
        GraphBuilder b;
        b.output(b.node(
            OpKind::kRotary,
            {b.input("x", s), b.constant("cos", tiled(11)),
             b.constant("sin", shared ? tiled(12) : testing::seededTensor({T, H * D}, 12))}));
        const Graph g = b.graph();
        auto reference = makeReferenceBackend();
        auto cpu = makeCpuBackend();
        const RunResult want = runOn(*reference, g, {s}, Precision::kFloat32);
        const RunResult got = runOn(*cpu, g, {s}, Precision::kFloat32);
        expectMatches(got, want, testing::kElementwiseTol.fp32);
        EXPECT_EQ(countOf(got.describe, shared ? "table period 10" : "table period 30"), 1)
            << got.describe;
    }
}

TEST(CpuBackend, LayerNormWritesBf16ForItsMatMulsInBf16Plans) {
    auto cpu = makeCpuBackend();
    if (!cpu->supportsPrecision(Precision::kBFloat16))
        GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu->deviceDescription();
    const int64_t T = 13, D = 37;
    GraphBuilder b;
    const Shape s{1, T, D};
    const ValueId x = b.input("x", s);
    auto ln = [&](ValueId v, bool bias) {
        std::vector<ValueId> in{v, b.constant("g", testing::seededTensor({D}, 3, 0.5f, 1.5f))};
        if (bias) in.push_back(b.weights("beta", {D}, 0.3f));
        return b.node(OpKind::kLayerNorm, in, [](Node& n) { n.axis = 2; });
    };
    auto matmul = [&](ValueId v) {
        return b.node(OpKind::kMatMul, {v, b.weights("w", {D, D}, 0.2f)});
    };
    const ValueId n1 = ln(x, true);  // read by two MatMuls
    const ValueId a = b.node(OpKind::kAdd, {matmul(n1), matmul(n1)});
    const ValueId n2 = ln(a, false);  // read by a MatMul and the residual Add
    b.output(b.node(OpKind::kAdd, {matmul(n2), n2}));
    const Graph g = b.graph();
    auto reference = makeReferenceBackend();
    const RunResult want = runOn(*reference, g, {s}, Precision::kFloat32);
    const RunResult got = runOn(*cpu, g, {s}, Precision::kBFloat16);
    ASSERT_EQ(got.outputs.size(), 1u);
    expectMatches(got, want, testing::kNetworkTol.bf16);
    EXPECT_EQ(countOf(got.describe, "layer_norm rows f32->bf16"), 1) << got.describe;
    EXPECT_EQ(countOf(got.describe, "layer_norm simple"), 1) << got.describe;
    // the first LayerNorm's MatMuls read its bf16 rows; only the second's output is reordered
    // (for its MatMul, which takes the Add as its fused residual)
    EXPECT_EQ(countOf(got.describe, "reorder plain:f32->plain:bf16"), 1) << got.describe;
}

// rowLayerNorm against LayerNorm in double: f32 output within 1e-5 of |y|'s scale, bf16 output
// within its rounding (2^-8 relative); rows of 1, 37 and 396 values (Primus' width).
TEST(CpuBackend, RowLayerNormMatchesDouble) {
    for (const int64_t cols : {1, 37, 396}) {
        const int64_t rows = 29;
        const Tensor x = testing::seededTensor({rows, cols}, 11, -3.0f, 5.0f);
        const Tensor gamma = testing::seededTensor({cols}, 12, 0.5f, 1.5f);
        const Tensor beta = testing::seededTensor({cols}, 13, -0.5f, 0.5f);
        const std::vector<float> xv = x.toFloats(), gv = gamma.toFloats(), bv = beta.toFloats();
        std::vector<float> yf(xv.size());
        std::vector<uint16_t> yb(xv.size());
        cpu::rowLayerNorm(xv.data(), yf.data(), false, rows, cols, gv.data(), bv.data(), 1e-5f);
        cpu::rowLayerNorm(xv.data(), yb.data(), true, rows, cols, gv.data(), bv.data(), 1e-5f);
        for (int64_t r = 0; r < rows; ++r) {
            double mean = 0, var = 0;
            for (int64_t c = 0; c < cols; ++c) mean += xv[r * cols + c];
            mean /= cols;
            for (int64_t c = 0; c < cols; ++c) var += std::pow(xv[r * cols + c] - mean, 2);
            var /= cols;
            for (int64_t c = 0; c < cols; ++c) {
                const size_t i = static_cast<size_t>(r * cols + c);
                const double want = (xv[i] - mean) / std::sqrt(var + 1e-5) * gv[c] + bv[c];
                ASSERT_NEAR(yf[i], want, 1e-5 * (1 + std::abs(want)))
                    << cols << " " << r << " " << c;
                ASSERT_NEAR(bfloat16ToFloat(yb[i]), want, 0x1p-8 * std::abs(want) + 1e-6)
                    << cols << " " << r << " " << c;
            }
        }
    }
}

TEST(CpuBackend, UnetLevelBf16WithinStatedTolerance) {
    auto cpu = makeCpuBackend();
    if (!cpu->supportsPrecision(Precision::kBFloat16))
        GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu->deviceDescription();
    const Graph g = unetLevel(2, 16, 32, 3);
    const std::vector<Shape> shapes = {{1, 2, 16, 14, 12}};
    auto reference = makeReferenceBackend();
    const RunResult want = runOn(*reference, g, shapes, Precision::kFloat32);
    const RunResult got = runOn(*cpu, g, shapes, Precision::kBFloat16);
    ASSERT_EQ(got.outputs.size(), 1u);
    // bf16 keeps 8 mantissa bits; after 7 conv+norm layers outputs of magnitude ~1 stay
    // within kNetworkTol.bf16 (atol 0.2, rtol 0.06).
    const auto cmp =
        testing::compareTensors(got.outputs[0], want.outputs[0], testing::kNetworkTol.bf16);
    EXPECT_LE(cmp.worst_ratio, 1.0) << "max abs error " << cmp.max_abs;
    EXPECT_NE(got.describe.find("bf16"), std::string::npos) << got.describe;
}

// Concats whose inputs die there and fill whole channel blocks are planned without a copy: the
// convolutions write straight into their parts of the output (nested concats too: the inner
// output is itself a part of the outer one). The last part may end in a partial block (8 of
// 16 channels). Every variant must match the reference backend.
Graph concatGraph(bool reuse_first_part, bool nested) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 3, 9, 10, 11});
    const ValueId a =
        b.node(OpKind::kRelu, {b.conv(x, 3, 32, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1})});
    const ValueId c = b.conv(x, 3, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    ValueId cat = b.node(OpKind::kConcat, {a, c}, [](Node& n) { n.axis = 1; });
    int64_t channels = 48;
    if (nested) {
        const ValueId d = b.conv(x, 3, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
        cat = b.node(OpKind::kConcat, {cat, d}, [](Node& n) { n.axis = 1; });
        channels += 8;
    }
    b.output(b.conv(cat, channels, 5, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}));
    // `a` read after the concat: it must keep its own buffer (the concat copies).
    if (reuse_first_part) b.output(b.conv(a, 32, 2, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}));
    return b.graph();
}

TEST(CpuBackend, ConcatOfBlockedPartsWritesInPlaceAndMatchesReference) {
    const std::vector<Shape> shapes = {{1, 3, 9, 10, 11}};
    auto reference = makeReferenceBackend();
    auto cpu = makeCpuBackend();
    struct Case {
        bool reuse, nested;
        int in_place, copies;
    };
    for (const Case k :
         {Case{false, false, 1, 0}, Case{false, true, 2, 0}, Case{true, false, 0, 1}}) {
        const Graph g = concatGraph(k.reuse, k.nested);
        const RunResult want = runOn(*reference, g, shapes, Precision::kFloat32);
        const RunResult got = runOn(*cpu, g, shapes, Precision::kFloat32);
        ASSERT_EQ(got.outputs.size(), want.outputs.size());
        for (size_t i = 0; i < got.outputs.size(); ++i) {
            const auto cmp =
                testing::compareTensors(got.outputs[i], want.outputs[i], testing::kNetworkTol.fp32);
            EXPECT_LE(cmp.worst_ratio, 1.0)
                << "reuse " << k.reuse << " nested " << k.nested << " output " << i
                << ": max abs error " << cmp.max_abs << "\n"
                << got.describe;
        }
        // nCdhw16c, or nCdhw8c where AVX2 is the widest the CPU (or DNNL_MAX_CPU_ISA) allows
        EXPECT_EQ(countOf(got.describe, "concat in place nCdhw"), k.in_place) << got.describe;
        EXPECT_EQ(countOf(got.describe, "concat simple"), k.copies) << got.describe;
    }
}

TEST(CpuBackend, BatchSizeTwoAndRepeatedRunsAreStable) {
    const Graph g = unetLevel(1, 16, 16, 2);
    const std::vector<Shape> shapes = {{2, 1, 16, 14, 12}};
    auto cpu = makeCpuBackend();
    auto exe = cpu->compile(g, shapes, {});
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    std::vector<Tensor> in = {testing::seededTensor(shapes[0], 3)}, out1, out2;
    ASSERT_TRUE((*exe)->run(in, out1).isOk());
    ASSERT_TRUE((*exe)->run(in, out2).isOk());
    const auto cmp = testing::compareTensors(out2[0], out1[0], {1e-30, 0.0});
    EXPECT_LE(cmp.worst_ratio, 1.0) << "second run differs: max abs error " << cmp.max_abs;
    // Batch item 1 equals a batch-1 run on the same data.
    const int64_t per = numel(shapes[0]) / 2;
    Tensor second(DType::kFloat32, Shape{1, 1, 16, 14, 12});
    std::copy(in[0].data<float>() + per, in[0].data<float>() + 2 * per, second.data<float>());
    auto exe1 = cpu->compile(g, {{1, 1, 16, 14, 12}}, {});
    ASSERT_TRUE(exe1.isOk());
    std::vector<Tensor> out_single;
    ASSERT_TRUE((*exe1)->run({second}, out_single).isOk());
    const int64_t out_per = out1[0].numel() / 2;
    Tensor out_second(DType::kFloat32, out_single[0].shape());
    std::copy(out1[0].data<float>() + out_per, out1[0].data<float>() + 2 * out_per,
              out_second.data<float>());
    const auto cmp2 = testing::compareTensors(out_second, out_single[0], testing::kConvTol.fp32);
    EXPECT_LE(cmp2.worst_ratio, 1.0) << "max abs error " << cmp2.max_abs;
}

TEST(CpuBackend, ErrorsNameNodeAndOp) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 4, 5, 5, 5});
    const ValueId w = b.input("w", {4, 4, 3, 3, 3});  // weights as a runtime input: unsupported
    const ValueId y = b.node(OpKind::kConv, {x, w}, [](Node& n) {
        n.name = "my_conv";
        n.conv.kernel = {3, 3, 3};
        n.conv.strides = {1, 1, 1};
        n.conv.dilations = {1, 1, 1};
        n.conv.pads_begin = {1, 1, 1};
        n.conv.pads_end = {1, 1, 1};
        n.conv.in_channels = 4;
        n.conv.out_channels = 4;
    });
    b.output(y);
    auto cpu = makeCpuBackend();
    auto exe = cpu->compile(b.graph(), {{1, 4, 5, 5, 5}, {4, 4, 3, 3, 3}}, {});
    ASSERT_FALSE(exe.isOk());
    EXPECT_NE(exe.status().message().find("my_conv"), std::string::npos);
    EXPECT_NE(exe.status().message().find("Conv"), std::string::npos);

    auto fp16 =
        cpu->compile(b.graph(), {{1, 4, 5, 5, 5}, {4, 4, 3, 3, 3}}, {Precision::kFloat16, 0, 0});
    ASSERT_FALSE(fp16.isOk());
    EXPECT_NE(fp16.status().message().find("fp16"), std::string::npos);
}

TEST(CpuBackend, WrongInputShapeAtRunIsAnError) {
    const Graph g = unetLevel(1, 16, 16, 2);
    auto cpu = makeCpuBackend();
    auto exe = cpu->compile(g, {{1, 1, 16, 14, 12}}, {});
    ASSERT_TRUE(exe.isOk());
    std::vector<Tensor> out;
    const Status s = (*exe)->run({Tensor(DType::kFloat32, {1, 1, 8, 8, 8})}, out);
    EXPECT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("[1, 1, 16, 14, 12]"), std::string::npos) << s.message();
}

TEST(CpuArenaPlanner, OverlappingLifetimesNeverShareBytesAndDisjointOnesReuse) {
    // a: steps 0-1, b: 1-2, c: 2-3, d: 3-4 (c and a, d and a/b are disjoint in time).
    const std::vector<size_t> bytes = {4096, 8192, 4096, 8192};
    const std::vector<std::pair<int, int>> life = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
    std::vector<size_t> off;
    const size_t total = cpu::planArenaOffsets(bytes, life, 4096, off);
    for (size_t i = 0; i < bytes.size(); ++i)
        for (size_t j = i + 1; j < bytes.size(); ++j) {
            const bool time = life[i].first <= life[j].second && life[j].first <= life[i].second;
            const bool space = off[i] < off[j] + bytes[j] && off[j] < off[i] + bytes[i];
            EXPECT_FALSE(time && space) << i << " and " << j;
        }
    // b and d (8 KiB) share bytes, and so do a and c (4 KiB).
    EXPECT_EQ(total, 8192u + 4096u);
}

TEST(CpuBackend, DeviceDescriptionNamesIsaAndBf16Truthfully) {
    auto cpu = makeCpuBackend();
    const std::string d = cpu->deviceDescription();
    EXPECT_TRUE(std::regex_search(d, std::regex("avx|sse"))) << d;
    const bool bf16_isa = d.find("bf16") != std::string::npos || d.find("amx") != std::string::npos;
    EXPECT_EQ(cpu->supportsPrecision(Precision::kBFloat16), bf16_isa) << d;
    EXPECT_TRUE(cpu->supportsPrecision(Precision::kFloat32));
    EXPECT_FALSE(cpu->supportsPrecision(Precision::kFloat16));
}

// Every activation fits, but those alive at once do not: the arena is refused before it is
// allocated (Linux over-commits; the process would be killed while the network writes it).
TEST(CpuBackend, ArenaLargerThanMemoryIsAnOutOfMemoryError) {
    const Graph g = unetLevel(1, 16, 16, 2);
    auto cpu = makeCpuBackend();
    // 16-channel float32 activations at 0.45 of the limit, the 32-channel concat at 0.9: the
    // concat and the convolutions reading and writing next to it are alive at once.
    const double limit = static_cast<double>(memoryLimitBytes());
    const auto edge = 2 * static_cast<int64_t>(std::cbrt(0.45 * limit / (16 * 4)) / 2);
    auto exe = cpu->compile(g, {{1, 1, edge, edge, edge}}, {});
    ASSERT_FALSE(exe.isOk());
    if (cpu::kernelIsa() != cpu::KernelIsa::kAvx512) {
        // oneDNN 2.6 plans no kernel for tensors this large without AVX-512: that is named.
        EXPECT_NE(exe.status().message().find("use a smaller patch"), std::string::npos)
            << exe.status().toString();
        return;
    }
    EXPECT_EQ(exe.status().code(), StatusCode::kOutOfMemory) << exe.status().toString();
    EXPECT_NE(exe.status().message().find("the activations need"), std::string::npos)
        << exe.status().toString();
}

}  // namespace
}  // namespace voxseg::engine

namespace voxseg::engine {
namespace {

// Issue 3, broken models: a patch whose activations cannot fit in memory is a clear error.
TEST(CpuBackend, PatchLargerThanMemoryIsAnOutOfMemoryError) {
    const Graph g = unetLevel(1, 16, 16, 2);
    auto cpu = makeCpuBackend();
    // An edge whose 16-channel float32 activations need more than this host's memory (64 GiB
    // at 1024^3), refused before oneDNN plans a kernel for them: on AVX2 oneDNN cannot create
    // primitives for tensors this large, which must not read as an unsupported op.
    const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    const auto edge =
        std::max<int64_t>(1024, 2 * static_cast<int64_t>(std::cbrt(memory / (16 * 4)) / 2 + 2));
    auto exe = cpu->compile(g, {{1, 1, edge, edge, edge}}, {});
    ASSERT_FALSE(exe.isOk());
    EXPECT_EQ(exe.status().code(), StatusCode::kOutOfMemory) << exe.status().toString();
    EXPECT_NE(exe.status().message().find("smaller patch"), std::string::npos);
    EXPECT_NE(exe.status().message().find("of memory"), std::string::npos)
        << exe.status().toString();
}

}  // namespace
}  // namespace voxseg::engine
