#include "tests/engine/int8_test_graphs.h"

#include "engine/cpu/cpu_backend.h"
#include "engine/quant/int8_policy.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace voxseg::engine::testing {

int countOf(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

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

Int8Error int8ErrorVsFp32(const std::vector<float>& got, const std::vector<float>& fp32) {
    Int8Error e;
    EXPECT_EQ(got.size(), fp32.size());
    const size_t n = std::min(got.size(), fp32.size());
    double sum = 0, lo = 1e30, hi = -1e30;
    for (size_t i = 0; i < n; ++i) {
        const double d = std::abs(static_cast<double>(got[i]) - fp32[i]);
        e.max = std::max(e.max, d);
        sum += d;
        lo = std::min<double>(lo, fp32[i]);
        hi = std::max<double>(hi, fp32[i]);
    }
    e.mean = n ? sum / static_cast<double>(n) : 0.0;
    e.range = hi - lo;
    return e;
}

namespace {

std::vector<Shape> shapesOf(const std::vector<Tensor>& inputs) {
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape());
    return shapes;
}

}  // namespace

std::shared_ptr<QuantizationRecord> calibrateMinMax(const Graph& g, const Tensor& input) {
    return calibrateMinMax(g, std::vector<Tensor>{input});
}

std::shared_ptr<QuantizationRecord> calibrateMinMax(const Graph& g,
                                                    const std::vector<Tensor>& inputs,
                                                    const std::vector<std::string>& also) {
    std::map<std::string, std::pair<float, float>> range;
    CompileOptions options;
    options.observer.tensors = quant::int8CandidateTensors(g, {}, /*upsampling=*/true);
    options.observer.tensors.insert(options.observer.tensors.end(), also.begin(), also.end());
    options.observer.callback = [&](const std::string& name, const float* d, const Shape& s) {
        const auto [lo, hi] = std::minmax_element(d, d + numel(s));
        range[name] = {*lo, *hi};
    };
    auto exe = makeCpuBackend()->compile(g, shapesOf(inputs), options);
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    auto record = std::make_shared<QuantizationRecord>();
    if (!exe.isOk()) return record;
    std::vector<Tensor> out;
    EXPECT_TRUE((*exe)->run(inputs, out).isOk());
    record->weight_bits = cpuInt8WeightBits(cpuInt8Traits());
    record->method = RangeMethod::kMinMax;
    record->calibration_cases = {"seeded"};
    for (const auto& [name, r] : range)
        record->activations[name] = *quant::activationQuantFromRange(r.first, r.second, name);
    return record;
}

size_t addNormInputScales(const Graph& g, const Tensor& input, QuantizationRecord& record) {
    return addNormInputScales(g, std::vector<Tensor>{input}, record);
}

size_t addNormInputScales(const Graph& g, const std::vector<Tensor>& inputs,
                          QuantizationRecord& record) {
    std::map<std::string, quant::Int8NormInput> wanted;
    CompileOptions options;
    for (const quant::Int8NormInput& in : quant::int8NormInputs(g, record.float_layers)) {
        wanted[in.tensor] = in;
        options.observer.tensors.push_back(in.tensor);
    }
    if (wanted.empty()) return 0;
    options.observer.callback = [&](const std::string& name, const float* d, const Shape& s) {
        const quant::Int8NormInput& in = wanted.at(name);
        const int64_t inner = numel(s) / (s[0] * s[1]);
        std::vector<float>& scales = record.norm_inputs[name];
        scales.assign(static_cast<size_t>(s[1]), 0.0f);
        for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t c = 0; c < s[1]; ++c) {
                const float centre = in.dropped_bias.empty() ? 0.0f : in.dropped_bias[c];
                const float* x = d + (n * s[1] + c) * inner;
                for (int64_t i = 0; i < inner; ++i)
                    scales[c] = std::max(scales[c], std::fabs(x[i] - centre) / 127.0f);
            }
    };
    auto exe = makeCpuBackend()->compile(g, shapesOf(inputs), options);
    EXPECT_TRUE(exe.isOk()) << exe.status().toString();
    if (!exe.isOk()) return 0;
    std::vector<Tensor> out;
    EXPECT_TRUE((*exe)->run(inputs, out).isOk());
    return wanted.size();
}

}  // namespace voxseg::engine::testing
