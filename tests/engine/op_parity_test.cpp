// Every op case on every compiled-in backend (other than the reference itself) against the
// reference backend, at every precision the backend supports.
#include "backends/registry.h"
#include "tests/engine/op_cases.h"

#include <gtest/gtest.h>

namespace voxseg::engine {
namespace {

using testing::allOpCases;
using testing::OpCase;

const std::vector<OpCase>& cases() {
    static const std::vector<OpCase> all = allOpCases();
    return all;
}

TEST(OpCases, EveryCaseInfersAndRunsOnReference) {
    auto reference = makeReferenceBackend();
    for (const OpCase& c : cases()) {
        SCOPED_TRACE(c.name + ": " + c.params);
        auto exe = reference->compile(c.graph, c.input_shapes, {});
        ASSERT_TRUE(exe.isOk()) << exe.status().toString();
        std::vector<Tensor> inputs, outputs;
        for (size_t i = 0; i < c.input_shapes.size(); ++i)
            inputs.push_back(testing::seededTensor(c.input_shapes[i], 42u + uint32_t(i)));
        ASSERT_TRUE((*exe)->run(inputs, outputs).isOk());
        for (const Tensor& t : outputs)
            for (float v : t.toFloats()) ASSERT_TRUE(std::isfinite(v));
    }
}

// The checker must be able to fail: a reference output nudged beyond the tolerance is caught.
TEST(OpCases, ComparisonDetectsAnErrorJustAboveTolerance) {
    const testing::Tolerance tol{1e-5, 1e-5};
    Tensor want = testing::seededTensor({3, 4}, 1);
    Tensor got = want.clone();
    EXPECT_LE(testing::compareTensors(got, want, tol).worst_ratio, 1.0);
    got.data<float>()[5] += 3e-5f + 1e-5f * std::abs(want.data<float>()[5]);
    const auto cmp = testing::compareTensors(got, want, tol);
    EXPECT_GT(cmp.worst_ratio, 1.0);
    EXPECT_EQ(cmp.worst_index, 5);
}

class OpParity : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(OpParity, MatchesReference) {
    const auto& [backend_name, index] = GetParam();
    const auto names = availableBackends();
    if (std::find(names.begin(), names.end(), backend_name) == names.end())
        GTEST_SKIP() << "backend '" << backend_name << "' is not compiled into this build";
    auto backend = createBackend(backend_name);
    if (!backend)
        GTEST_SKIP() << "backend '" << backend_name
                     << "' unusable here: " << backend.status().toString();
    const OpCase& c = cases()[index];
    for (Precision p : {Precision::kFloat32, Precision::kFloat16, Precision::kBFloat16}) {
        if (!(*backend)->supportsPrecision(p)) continue;
        testing::expectParity(**backend, c, p);
        if (p == Precision::kFloat32) testing::expectParity(**backend, c, p, /*optimized=*/true);
    }
}

std::string paramName(const ::testing::TestParamInfo<OpParity::ParamType>& info) {
    return std::get<0>(info.param) + "_" + cases()[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(Backends, OpParity,
                         ::testing::Combine(::testing::Values("cpu", "cuda"),
                                            ::testing::Range<size_t>(0, cases().size())),
                         paramName);

}  // namespace
}  // namespace voxseg::engine
