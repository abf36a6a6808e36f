#include "tests/engine/int8_test_graphs.h"

#include "engine/cpu/cpu_backend.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace voxseg::engine::testing {

Graph int8UnetLevel() {
    GraphBuilder b;
    auto block = [&](ValueId x, int64_t cin, int64_t cout, std::vector<int64_t> s) {
        ValueId y = b.conv(x, cin, cout, {3, 3, 3}, s, {1, 1, 1, 1, 1, 1});
        y = b.norm(OpKind::kInstanceNorm, y, cout);
        const ValueId a = b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
        y = b.conv(a, cout, cout, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1});
        y = b.node(OpKind::kAdd, {y, a});  // residual: fused into the conv
        y = b.norm(OpKind::kInstanceNorm, y, cout);
        return b.node(OpKind::kLeakyRelu, {y}, [](Node& n) { n.alpha = 0.01f; });
    };
    const ValueId x = b.input("x", {1, 2, 16, 14, 12});
    const ValueId skip = block(x, 2, 8, {1, 1, 1});
    const ValueId down = block(skip, 8, 16, {2, 2, 2});
    const ValueId up = b.convTranspose(down, 16, 8, {2, 2, 2}, {2, 2, 2});
    const ValueId cat = b.node(OpKind::kConcat, {skip, up}, [](Node& n) { n.axis = 1; });
    const ValueId dec = block(cat, 16, 8, {1, 1, 1});
    b.output(b.conv(dec, 8, 3, {1, 1, 1}));
    return b.graph();
}

std::shared_ptr<QuantizationRecord> calibrateMinMax(const Graph& g, const Tensor& input) {
    std::map<std::string, std::pair<float, float>> range;
    CompileOptions options;
    options.observer.tensors = quant::int8CandidateTensors(g, {});
    options.observer.callback = [&](const std::string& name, const float* d, const Shape& s) {
        const auto [lo, hi] = std::minmax_element(d, d + numel(s));
        range[name] = {*lo, *hi};
    };
    auto exe = makeCpuBackend()->compile(g, {input.shape()}, options);
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    auto record = std::make_shared<QuantizationRecord>();
    if (!exe.isOk()) return record;
    std::vector<Tensor> out;
    EXPECT_TRUE((*exe)->run({input}, out).isOk());
    record->weight_bits = cpuInt8WeightBits(cpuInt8Traits());
    record->method = RangeMethod::kMinMax;
    record->calibration_cases = {"seeded"};
    for (const auto& [name, r] : range)
        record->activations[name] = *quant::activationQuantFromRange(r.first, r.second, name);
    return record;
}

}  // namespace voxseg::engine::testing
