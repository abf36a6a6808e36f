// Reference elementwise ops: the unary activations and math functions, PRelu, Add / Sub /
// Mul / Div and Where with numpy broadcasting, and the epilogues optimize() fuses into a node.
#include "engine/graph/broadcast.h"
#include "engine/reference/ops.h"

#include <algorithm>
#include <cmath>

namespace voxseg::engine::reference {

namespace {

double geluExact(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double geluTanh(double v) {
    const double k = std::sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
}

}  // namespace

// y = f(x) for the activation and math ops (one float loop each).
void unary(const Node& n, const Tensor& x, Tensor& y) {
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    auto each = [&](auto f) {
        for (int64_t i = 0; i < y.numel(); ++i) yp[i] = f(xp[i]);
    };
    switch (n.op) {
        case OpKind::kRelu:
            each([](float v) { return std::max(v, 0.0f); });
            break;
        case OpKind::kLeakyRelu:
            each([&](float v) { return v >= 0 ? v : v * n.alpha; });
            break;
        case OpKind::kSigmoid:
            each(sigmoid);
            break;
        case OpKind::kTanh:
            each([](float v) { return std::tanh(v); });
            break;
        case OpKind::kClip:
            each([&](float v) { return std::min(std::max(v, n.clip_min), n.clip_max); });
            break;
        case OpKind::kGelu:
            if (n.gelu_tanh)
                each([](float v) { return static_cast<float>(geluTanh(v)); });
            else
                each([](float v) { return static_cast<float>(geluExact(v)); });
            break;
        case OpKind::kSilu:
            each([](float v) { return static_cast<float>(v / (1.0 + std::exp(-double(v)))); });
            break;
        default:  // the formulas every backend shares (engine/graph/unary_math.h)
            if (const auto fn = unaryFnOf(n.op))
                each([&](float v) { return unaryValue(*fn, v, n.alpha, n.beta); });
            break;
    }
}

void binary(OpKind op, const Tensor& a, const Tensor& b, Tensor& y) {
    const std::vector<float> av = a.toFloats(), bv = b.toFloats();
    float* yp = y.data<float>();
    auto each = [&](auto f) {
        forEachBroadcast<2>(
            y.shape(), {&a.shape(), &b.shape()},
            [&](int64_t i, const std::array<int64_t, 2>& o) { yp[i] = f(av[o[0]], bv[o[1]]); });
    };
    switch (op) {
        case OpKind::kAdd:
            each([](float u, float v) { return u + v; });
            break;
        case OpKind::kSub:
            each([](float u, float v) { return u - v; });
            break;
        case OpKind::kMul:
            each([](float u, float v) { return u * v; });
            break;
        default:
            each([](float u, float v) { return u / v; });
            break;
    }
}

// y = x where x >= 0, else x * slope (the slope broadcast to x).
void prelu(const Tensor& x, const Tensor& slope, Tensor& y) {
    const std::vector<float> sv = slope.toFloats();
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    forEachBroadcast<1>(y.shape(), {&slope.shape()},
                        [&](int64_t i, const std::array<int64_t, 1>& o) {
                            yp[i] = xp[i] >= 0 ? xp[i] : xp[i] * sv[o[0]];
                        });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y) {
    const std::vector<float> c = cond.toFloats(), av = a.toFloats(), bv = b.toFloats();
    float* yp = y.data<float>();
    forEachBroadcast<3>(y.shape(), {&cond.shape(), &a.shape(), &b.shape()},
                        [&](int64_t i, const std::array<int64_t, 3>& o) {
                            yp[i] = c[o[0]] != 0 ? av[o[1]] : bv[o[2]];
                        });
}

// out = act(out [+ residual]) for epilogues fused by optimize().
void applyEpilogue(const Node& n, const std::vector<Tensor>& env, Tensor& y) {
    float* yp = y.data<float>();
    if (n.fused_residual >= 0) {
        const float* rp = env[n.fused_residual].data<float>();
        for (int64_t i = 0; i < y.numel(); ++i) yp[i] += rp[i];
    }
    switch (n.fused_activation) {
        case ActivationKind::kNone:
            break;
        case ActivationKind::kRelu:
            for (int64_t i = 0; i < y.numel(); ++i) yp[i] = std::max(yp[i], 0.0f);
            break;
        case ActivationKind::kLeakyRelu:
            for (int64_t i = 0; i < y.numel(); ++i)
                yp[i] = yp[i] >= 0 ? yp[i] : yp[i] * n.fused_alpha;
            break;
        case ActivationKind::kSigmoid:
            for (int64_t i = 0; i < y.numel(); ++i) yp[i] = sigmoid(yp[i]);
            break;
        case ActivationKind::kSilu:
            for (int64_t i = 0; i < y.numel(); ++i) yp[i] *= sigmoid(yp[i]);
            break;
        case ActivationKind::kPRelu: {
            const Tensor& slope = env[n.fused_prelu_slope];
            const std::vector<float> sv = slope.toFloats();
            forEachBroadcast<1>(y.shape(), {&slope.shape()},
                                [&](int64_t i, const std::array<int64_t, 1>& o) {
                                    if (yp[i] < 0) yp[i] *= sv[o[0]];
                                });
            break;
        }
    }
}

}  // namespace voxseg::engine::reference
