// The op table (engine/graph/op_kind.h) and the shared unary formulas
// (engine/graph/unary_math.h): every op has a name and a shape rule, and each formula matches
// an independent double-precision spelling of its definition (the ONNX operator docs).
#include "engine/graph/op_kind.h"
#include "engine/graph/shapes/shape_rules.h"
#include "engine/graph/unary_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

namespace voxseg::engine {
namespace {

TEST(OpKind, EveryOpHasAUniqueNameAndAShapeRule) {
    std::set<std::string> names;
    for (const OpInfo& info : kOpInfo) {
        SCOPED_TRACE(info.name);
        EXPECT_TRUE(names.insert(info.name).second) << "name used twice";
        EXPECT_NE(shapes::shapeRule(info.kind), nullptr);
        if (info.unary_fn) EXPECT_EQ(info.category, OpCategory::kUnaryElementwise);
    }
    EXPECT_EQ(std::string(opKindName(OpKind::kElu)), "Elu");
    EXPECT_EQ(opCategory(OpKind::kHardSwish), OpCategory::kUnaryElementwise);
    EXPECT_EQ(opCategory(OpKind::kAdd), OpCategory::kBinaryElementwise);
}

struct Formula {
    UnaryFn fn;
    float alpha, beta;
    std::function<double(double)> want;
};

TEST(UnaryMath, MatchesTheDefinitions) {
    const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
    auto softplus = [](double x) { return std::log1p(std::exp(x)); };
    const std::vector<Formula> formulas = {
        {UnaryFn::kErf, 0, 0, [](double x) { return std::erf(x); }},
        {UnaryFn::kElu, 0.7f, 0, [](double x) { return x > 0 ? x : 0.7 * (std::exp(x) - 1); }},
        {UnaryFn::kSelu, float(selu_a), float(selu_g),
         [&](double x) { return selu_g * (x > 0 ? x : selu_a * (std::exp(x) - 1)); }},
        {UnaryFn::kCelu, 1.3f, 0,
         [](double x) { return std::max(0.0, x) + std::min(0.0, 1.3 * (std::exp(x / 1.3) - 1)); }},
        {UnaryFn::kSoftplus, 0, 0, softplus},
        {UnaryFn::kMish, 0, 0, [&](double x) { return x * std::tanh(softplus(x)); }},
        {UnaryFn::kHardSigmoid, 0.25f, 0.4f,
         [](double x) { return std::clamp(0.25 * x + 0.4, 0.0, 1.0); }},
        {UnaryFn::kHardSwish, 0, 0, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
    };
    for (const Formula& f : formulas) {
        for (double x = -40.0; x <= 40.0; x += 0.37) {
            SCOPED_TRACE("UnaryFn " + std::to_string(int(f.fn)) + " at x = " + std::to_string(x));
            const double want = f.want(x);
            const double got = unaryValue(f.fn, float(x), f.alpha, f.beta);
            ASSERT_TRUE(std::isfinite(got));
            EXPECT_NEAR(got, want, 2e-6 * std::max(1.0, std::abs(want)));
        }
    }
}

}  // namespace
}  // namespace voxseg::engine
