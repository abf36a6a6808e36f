// Activation observers (engine/activation_observer.h): the cpu backend hands each requested
// tensor to the callback once per run, as plain float32 equal to what the reference backend
// computes for it; unknown names and other backends are refused.
#include "engine/activation_observer.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <map>

namespace voxseg::engine {
namespace {

using testing::GraphBuilder;

struct Net {
    Graph graph;
    std::string x, hidden, out;  // tensor names
};

// conv -> InstanceNorm -> LeakyReLU -> conv (the hidden tensor is the second conv's input).
Net smallNet() {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 3, 9, 8, 7});
    ValueId y = b.conv(x, 3, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    y = b.norm(OpKind::kInstanceNorm, y, 8);
    const ValueId hidden = b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
    const ValueId out = b.conv(hidden, 8, 4, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    b.output(out);
    Graph& g = b.graph();
    return {g, g.values[x].name, g.values[hidden].name, g.values[out].name};
}

TEST(ActivationObserver, CpuHandsEachTensorOncePerRunAsTheReferenceComputesIt) {
    const Net net = smallNet();
    const Shape shape{2, 3, 9, 8, 7};
    const Tensor input = testing::seededTensor(shape, 5);

    // The reference's values of the hidden tensor: the same graph with it as a second output.
    Graph with_hidden = net.graph;
    for (size_t v = 0; v < with_hidden.values.size(); ++v)
        if (with_hidden.values[v].name == net.hidden)
            with_hidden.outputs.push_back(static_cast<ValueId>(v));
    auto reference = makeReferenceBackend();
    auto ref_exe = reference->compile(with_hidden, {shape}, {});
    ASSERT_TRUE(ref_exe.isOk()) << ref_exe.status().toString();
    std::vector<Tensor> expected;
    ASSERT_TRUE((*ref_exe)->run({input}, expected).isOk());

    std::map<std::string, std::vector<float>> seen;
    std::map<std::string, Shape> shapes;
    std::vector<std::string> order;
    CompileOptions options;
    options.observer.tensors = {net.hidden, net.x, net.out};
    options.observer.callback = [&](const std::string& name, const float* data, const Shape& s) {
        seen[name].assign(data, data + numel(s));
        shapes[name] = s;
        order.push_back(name);
    };
    auto cpu = makeCpuBackend();
    auto exe = cpu->compile(net.graph, {shape}, options);
    ASSERT_TRUE(exe.isOk()) << exe.status().toString();
    std::vector<Tensor> outputs;
    ASSERT_TRUE((*exe)->run({input}, outputs).isOk());
    // Graph order: the input first, then the hidden tensor, then the output.
    ASSERT_EQ(order, (std::vector<std::string>{net.x, net.hidden, net.out}));
    EXPECT_EQ(shapes[net.hidden], (Shape{2, 8, 9, 8, 7}));
    EXPECT_EQ(seen[net.x], input.toFloats());
    const std::vector<float> want = expected[1].toFloats(), got = seen[net.hidden];
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
    EXPECT_EQ(seen[net.out], outputs[0].toFloats());
    ASSERT_TRUE((*exe)->run({input}, outputs).isOk());
    EXPECT_EQ(order.size(), 6u);  // once per tensor per run
}

TEST(ActivationObserver, UnknownTensorsAndOtherBackendsAreRefused) {
    const Net net = smallNet();
    CompileOptions options;
    options.observer.tensors = {"no_such_tensor"};
    options.observer.callback = [](const std::string&, const float*, const Shape&) {};
    auto cpu = makeCpuBackend();
    auto exe = cpu->compile(net.graph, {{1, 3, 9, 8, 7}}, options);
    ASSERT_FALSE(exe.isOk());
    EXPECT_NE(exe.status().message().find("'no_such_tensor'"), std::string::npos)
        << exe.status().toString();
    options.observer.tensors = {net.hidden};
    auto reference = makeReferenceBackend();
    auto ref = reference->compile(net.graph, {{1, 3, 9, 8, 7}}, options);
    ASSERT_FALSE(ref.isOk());
    EXPECT_NE(ref.status().message().find("observer"), std::string::npos);
}

// Calibration observes the inputs of the Convs that may run in int8: by default all but the first
// and the last; a tensor read by two such Convs is listed once; a k = s ConvTranspose's input only
// for int8 up-sampling (calibrate --upsampling int8), and it is no Conv candidate (not an end).
TEST(ActivationObserver, Int8CandidateTensorsAreTheInputsOfEligibleConvs) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 2, 8, 8, 8});
    const ValueId c0 = b.conv(x, 2, 4, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    const ValueId a0 = b.node(OpKind::kRelu, {c0});  // fused into c0: c0's output is a0
    const ValueId c1 = b.conv(a0, 4, 4, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
    const ValueId c2 = b.conv(a0, 4, 4, {1, 1, 1});
    const ValueId sum = b.node(OpKind::kAdd, {c1, c2});
    const ValueId up = b.convTranspose(sum, 4, 4, {2, 2, 2}, {2, 2, 2});
    const ValueId head = b.conv(up, 4, 3, {1, 1, 1});
    b.output(head);
    const Graph& g = b.graph();
    const auto candidates = quant::int8ConvCandidates(g);
    ASSERT_EQ(candidates.size(), 4u);
    EXPECT_EQ(candidates[0].input, "x");
    EXPECT_EQ(candidates[3].input, g.values[up].name);
    const auto floats = quant::defaultInt8FloatLayers(g);
    ASSERT_EQ(floats.size(), 2u);
    EXPECT_EQ(floats[0], candidates[0].node);
    EXPECT_EQ(floats[1], candidates[3].node);
    EXPECT_EQ(quant::int8CandidateTensors(g, floats),
              (std::vector<std::string>{g.values[a0].name}));
    EXPECT_EQ(quant::int8CandidateTensors(g, {}),
              (std::vector<std::string>{"x", g.values[a0].name, g.values[up].name}));
    EXPECT_EQ(quant::int8CandidateTensors(g, floats, /*upsampling=*/true),
              (std::vector<std::string>{g.values[a0].name, g.values[sum].name}));
}

}  // namespace
}  // namespace voxseg::engine
