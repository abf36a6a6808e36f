// Graph shape inference, FLOP counting and the optimize() rewrites (checked numerically on the
// reference backend: a rewrite must not change the outputs).
#include "engine/graph/graph.h"
#include "engine/passes/optimize.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

std::vector<float> runGraph(const Graph& g, const std::vector<Shape>& shapes) {
    auto exe = makeReferenceBackend()->compile(g, shapes, {});
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe) return {};
    std::vector<Tensor> inputs, out;
    for (size_t i = 0; i < shapes.size(); ++i)
        inputs.push_back(testing::seededTensor(shapes[i], 7 + uint32_t(i)));
    EXPECT_TRUE((*exe)->run(inputs, out).isOk());
    return out.empty() ? std::vector<float>{} : out[0].toFloats();
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        m = std::max(m, double(std::abs(a[i] - b[i])));
    return m;
}

int countOps(const Graph& g, OpKind op) {
    int n = 0;
    for (const Node& node : g.nodes) n += node.op == op;
    return n;
}

TEST(Graph, InfersConvAndConvTransposeShapesForOddInputs) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 13, 11, 10, 9});
    const ValueId d = b.conv(x, 13, 8, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1});
    const ValueId u = b.convTranspose(d, 8, 4, {2, 2, 2}, {2, 2, 2});
    b.output(u);
    Graph& g = b.graph();
    ASSERT_TRUE(g.inferShapes({{2, 13, 11, 10, 9}}).isOk());
    EXPECT_EQ(g.values[d].shape, (Shape{2, 8, 6, 5, 5}));
    EXPECT_EQ(g.values[u].shape, (Shape{2, 4, 12, 10, 10}));
    // 2 FLOP per MAC: conv 2*numel(out)*13*27, convT 2*numel(in)*4*8.
    const double want = 2.0 * (2 * 8 * 6 * 5 * 5) * 13 * 27 + 2.0 * (2 * 8 * 6 * 5 * 5) * 4 * 8;
    EXPECT_DOUBLE_EQ(g.convFlops(), want);
}

TEST(Graph, ShapeErrorsNameTheNode) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 13, 11, 10, 9});
    b.output(b.conv(x, 12, 8, {3, 3, 3}));
    const Status s = b.graph().inferShapes({{1, 13, 11, 10, 9}});
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("Conv node 'Conv_0'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("13 channels"), std::string::npos) << s.message();

    GraphBuilder c;
    const ValueId y = c.input("y", {1, 2, 3});
    c.output(c.node(OpKind::kAdd, {y, c.input("z", {1, 4, 3})}));
    const Status t = c.graph().inferShapes({{1, 2, 3}, {1, 4, 3}});
    ASSERT_FALSE(t.isOk());
    EXPECT_NE(t.message().find("do not broadcast"), std::string::npos) << t.message();
}

TEST(Graph, DanglingValueIdIsAnErrorNotACrash) {
    GraphBuilder b;
    b.output(b.node(OpKind::kRelu, {b.input("x", {1, 2})}));
    b.graph().nodes[0].inputs[0] = 99;
    const Status s = b.graph().inferShapes({{1, 2}});
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
}

TEST(Graph, ResizeOutputSurvivesScaleRounding) {
    GraphBuilder b;
    b.output(b.node(OpKind::kResize, {b.input("x", {1, 1, 13})}, [](Node& n) {
        n.resize.scales = {1, 1, 7.0f / 13.0f};
    }));
    ASSERT_TRUE(b.graph().inferShapes({{1, 1, 13}}).isOk());
    EXPECT_EQ(b.graph().values[b.graph().outputs[0]].shape, (Shape{1, 1, 7}));
}

TEST(Optimize, FoldsBatchNormIntoConv) {
    GraphBuilder b;
    const Shape s{1, 5, 7, 6, 5};
    const ValueId x = b.input("x", s);
    const ValueId c = b.conv(x, 5, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    const ValueId sc = b.constant("s", testing::seededTensor({6}, 3, 0.5f, 1.5f));
    const ValueId bi = b.weights("b", {6});
    const ValueId mean = b.weights("m", {6});
    const ValueId var = b.constant("v", testing::seededTensor({6}, 4, 0.2f, 2.0f));
    b.output(b.node(OpKind::kBatchNorm, {c, sc, bi, mean, var}));
    const Graph opt = optimize(b.graph());
    EXPECT_EQ(countOps(opt, OpKind::kBatchNorm), 0);
    EXPECT_EQ(opt.nodes.size(), 1u);
    EXPECT_LT(maxAbsDiff(runGraph(b.graph(), {s}), runGraph(opt, {s})), 1e-5);
}

TEST(Optimize, FusesNormActivationAndResidual) {
    GraphBuilder b;
    const Shape s{1, 4, 6, 5, 4};
    const ValueId x = b.input("x", s);
    const ValueId id = b.node(OpKind::kIdentity, {x});
    ValueId h = b.conv(id, 4, 4, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    h = b.norm(OpKind::kInstanceNorm, h, 4);
    h = b.node(OpKind::kLeakyRelu, {h}, [](Node& n) { n.alpha = 0.01f; });
    h = b.conv(h, 4, 4, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    h = b.node(OpKind::kAdd, {x, h});
    h = b.node(OpKind::kRelu, {h});
    b.output(h);
    const Graph opt = optimize(b.graph());
    ASSERT_EQ(opt.nodes.size(), 3u);  // conv, instnorm+lrelu, conv+residual+relu
    EXPECT_EQ(opt.nodes[1].fused_activation, ActivationKind::kLeakyRelu);
    EXPECT_FLOAT_EQ(opt.nodes[1].fused_alpha, 0.01f);
    EXPECT_EQ(opt.nodes[2].fused_residual, x);
    EXPECT_EQ(opt.nodes[2].fused_activation, ActivationKind::kRelu);
    EXPECT_LT(maxAbsDiff(runGraph(b.graph(), {s}), runGraph(opt, {s})), 1e-6);
}

TEST(Optimize, KeepsActivationWhenTheProducerOutputIsUsedTwice) {
    GraphBuilder b;
    const Shape s{1, 3, 4, 4, 4};
    const ValueId x = b.input("x", s);
    const ValueId c = b.conv(x, 3, 3, {1, 1, 1});
    const ValueId r = b.node(OpKind::kRelu, {c});
    b.output(b.node(OpKind::kAdd, {c, r}));
    const Graph opt = optimize(b.graph());
    EXPECT_EQ(countOps(opt, OpKind::kRelu), 1);
    EXPECT_EQ(opt.nodes[0].fused_activation, ActivationKind::kNone);
    EXPECT_LT(maxAbsDiff(runGraph(b.graph(), {s}), runGraph(opt, {s})), 1e-6);
}

// The shared parity table's case `name` (its graph is the exported pattern).
testing::OpCase tableCase(const std::string& name) {
    for (testing::OpCase& c : testing::allOpCases())
        if (c.name == name) return c;
    ADD_FAILURE() << "no op case " << name;
    return {};
}

TEST(Optimize, FoldsLinearBiasLayerScaleAndResidualIntoTheMatMul) {
    const testing::OpCase c = tableCase("matmul_bias_layerscale_residual");
    const Graph opt = optimize(c.graph);
    ASSERT_EQ(opt.nodes.size(), 1u);
    const Node& mm = opt.nodes[0];
    EXPECT_EQ(mm.op, OpKind::kMatMul);
    ASSERT_EQ(mm.inputs.size(), 3u);  // bias fused
    EXPECT_EQ(mm.fused_residual, c.graph.inputs[0]);
    EXPECT_LT(maxAbsDiff(runGraph(c.graph, c.input_shapes), runGraph(opt, c.input_shapes)), 1e-5);
}

TEST(Optimize, FusesSiluIntoItsProducer) {
    const testing::OpCase c = tableCase("swiglu");
    const Graph opt = optimize(c.graph);
    EXPECT_EQ(countOps(opt, OpKind::kSilu), 0);
    int gates = 0;
    for (const Node& n : opt.nodes) gates += n.fused_activation == ActivationKind::kSilu;
    EXPECT_EQ(gates, 1);
    EXPECT_LT(maxAbsDiff(runGraph(c.graph, c.input_shapes), runGraph(opt, c.input_shapes)), 1e-6);
    // and into a convolution (MONAI's "swish" blocks)
    GraphBuilder b;
    const Shape s{1, 3, 4, 4, 4};
    b.output(b.node(OpKind::kSilu, {b.conv(b.input("x", s), 3, 3, {1, 1, 1})}));
    const Graph conv = optimize(b.graph());
    ASSERT_EQ(conv.nodes.size(), 1u);
    EXPECT_EQ(conv.nodes[0].fused_activation, ActivationKind::kSilu);
    EXPECT_LT(maxAbsDiff(runGraph(b.graph(), {s}), runGraph(conv, {s})), 1e-6);
}

TEST(Optimize, FusesTheExportedRotaryEmbeddingChain) {
    const testing::OpCase c = tableCase("rotary_pattern_eva");
    const Graph opt = optimize(c.graph);
    ASSERT_EQ(opt.nodes.size(), 1u);  // slices, concats, muls and the scale: one node
    EXPECT_EQ(opt.nodes[0].op, OpKind::kRotary);
    EXPECT_LT(maxAbsDiff(runGraph(c.graph, c.input_shapes), runGraph(opt, c.input_shapes)), 1e-6);
}

TEST(Optimize, FoldsTheHeadTransposesIntoMultiHeadAttention) {
    const testing::OpCase c = tableCase("attention_heads_pattern_primus");
    const Graph opt = optimize(c.graph);
    EXPECT_EQ(countOps(opt, OpKind::kMultiHeadAttention), 1);
    EXPECT_EQ(countOps(opt, OpKind::kAttention), 0);
    EXPECT_EQ(countOps(opt, OpKind::kTranspose), 0);
    EXPECT_EQ(countOps(opt, OpKind::kRotary), 2);
    EXPECT_LT(maxAbsDiff(runGraph(c.graph, c.input_shapes), runGraph(opt, c.input_shapes)), 1e-5);
    // The net_transformer_block case (no Rotary) folds as well.
    const Graph block = optimize(tableCase("net_transformer_block").graph);
    EXPECT_EQ(countOps(block, OpKind::kMultiHeadAttention), 1);
    EXPECT_EQ(countOps(block, OpKind::kTranspose), 0);
}

// Swin's shifted-window scores (Reshape to [B, nW, ...], + mask, Reshape back) fold into one
// Attention whose second bias is the mask without its leading 1, its storage shared.
TEST(Optimize, FoldsSwinsWindowMaskIntoTheAttention) {
    const testing::OpCase c = tableCase("attention_pattern_swin_shifted");
    const Graph opt = optimize(c.graph);
    ASSERT_EQ(opt.nodes.size(), 1u);
    const Node& att = opt.nodes[0];
    EXPECT_EQ(att.op, OpKind::kAttention);
    ASSERT_EQ(att.inputs.size(), 5u);
    EXPECT_EQ(opt.values[att.inputs[3]].shape, (Shape{1, 2, 40, 40}));
    EXPECT_EQ(opt.values[att.inputs[4]].shape, (Shape{3, 1, 40, 40}));
    const auto mask = std::find_if(c.graph.values.begin(), c.graph.values.end(),
                                   [](const Value& v) { return v.name == "mask"; });
    ASSERT_NE(mask, c.graph.values.end());
    EXPECT_EQ(opt.values[att.inputs[4]].constant->data<float>(), mask->constant->data<float>());
    EXPECT_LT(maxAbsDiff(runGraph(c.graph, c.input_shapes), runGraph(opt, c.input_shapes)), 1e-5);
}

// torch.roll over three axes (three Concat(Slice, Slice) pairs) and a crop of three Slices become
// one Roll and one Slice, with the same outputs.
TEST(Optimize, FoldsTorchRollIntoOneRollAndSliceChainsIntoOneSlice) {
    const testing::OpCase c = tableCase("roll_pattern_torch");
    EXPECT_EQ(countOps(c.graph, OpKind::kSlice), 9);
    const Graph opt = optimize(c.graph);
    ASSERT_EQ(opt.nodes.size(), 2u);
    EXPECT_EQ(opt.nodes[0].op, OpKind::kRoll);
    EXPECT_EQ(opt.nodes[0].roll_shifts, (std::vector<int64_t>{0, 3, 6, 6, 0}));
    EXPECT_EQ(opt.nodes[1].op, OpKind::kSlice);
    EXPECT_LT(maxAbsDiff(runGraph(c.graph, c.input_shapes), runGraph(opt, c.input_shapes)), 1e-7);
}

// A bias's batch axis may tile the scores' (3 items on 6) but not fall short of it (4 on 6),
// and its row and column axes broadcast only as numpy does.
TEST(Graph, AttentionBiasesTileOnlyBatchAxesTheyDivide) {
    for (const auto& [mask, fits] : std::vector<std::pair<Shape, bool>>{{{3, 1, 5, 7}, true},
                                                                        {{6, 2, 5, 7}, true},
                                                                        {{4, 1, 5, 7}, false},
                                                                        {{3, 1, 1, 7}, true},
                                                                        {{1, 1, 5, 1}, true},
                                                                        {{1, 1, 5, 14}, false}}) {
        GraphBuilder b;
        const ValueId q = b.input("q", {6, 2, 5, 4}), kt = b.input("kt", {6, 2, 4, 7}),
                      v = b.input("v", {6, 2, 7, 3});
        b.output(b.node(OpKind::kAttention,
                        {q, kt, v, -1, b.constant("m", Tensor(DType::kFloat32, mask))}));
        const Status s = b.graph().inferShapes({{6, 2, 5, 4}, {6, 2, 4, 7}, {6, 2, 7, 3}});
        EXPECT_EQ(s.isOk(), fits) << shapeToString(mask) << ": " << s.toString();
        if (!fits)
            EXPECT_NE(s.message().find("does not broadcast to the scores"), std::string::npos);
    }
}

TEST(Optimize, FusesPReluWithConstantSlope) {
    GraphBuilder b;
    const Shape s{1, 3, 5, 4, 3};
    const ValueId x = b.input("x", s);
    const ValueId c = b.conv(x, 3, 5, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    b.output(b.node(OpKind::kPRelu, {c, b.weights("slope", {5, 1, 1, 1}, 0.5f)}));
    const Graph opt = optimize(b.graph());
    ASSERT_EQ(opt.nodes.size(), 1u);
    EXPECT_EQ(opt.nodes[0].fused_activation, ActivationKind::kPRelu);
    EXPECT_LT(maxAbsDiff(runGraph(b.graph(), {s}), runGraph(opt, {s})), 1e-6);
}

}  // namespace
}  // namespace voxseg::engine
