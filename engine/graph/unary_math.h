// The formula of each elementwise unary op that every backend computes the same way: written
// once here and called by the reference backend, the CPU backend's plain loops and the CUDA
// kernels (the function is __host__ __device__ under nvcc). An op whose row in kOpInfo
// (engine/graph/op_kind.h) names a UnaryFn needs no kernel of its own in any backend.
//
// Parameters are the node's alpha and beta as ONNX names them (Selu's gamma is beta). float in,
// float out, no state; thread-safe.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define VOXSEG_UNARY_HD __host__ __device__ inline
#else
#define VOXSEG_UNARY_HD inline
#endif

namespace voxseg::engine {

enum class UnaryFn : int {
    kErf,
    kSqrt,
    kSin,
    kCos,
    kElu,
    kSelu,
    kCelu,
    kSoftplus,
    kMish,
    kHardSigmoid,
    kHardSwish,
};

// log(1 + e^x) without overflow for large x and without losing small values for very negative x.
VOXSEG_UNARY_HD float softplusValue(float x) {
    return x > 20.0f ? x : (x < -20.0f ? expf(x) : log1pf(expf(x)));
}

VOXSEG_UNARY_HD float unaryValue(UnaryFn fn, float x, float alpha, float beta) {
    switch (fn) {
        case UnaryFn::kErf:
            return erff(x);
        case UnaryFn::kSqrt:
            return sqrtf(x);
        case UnaryFn::kSin:
            return sinf(x);
        case UnaryFn::kCos:
            return cosf(x);
        case UnaryFn::kElu:
            return x > 0.0f ? x : alpha * expm1f(x);
        case UnaryFn::kSelu:
            return beta * (x > 0.0f ? x : alpha * expm1f(x));
        case UnaryFn::kCelu:
            return fmaxf(0.0f, x) + fminf(0.0f, alpha * expm1f(x / alpha));
        case UnaryFn::kSoftplus:
            return softplusValue(x);
        case UnaryFn::kMish:
            return x * tanhf(softplusValue(x));
        case UnaryFn::kHardSigmoid:
            return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
        case UnaryFn::kHardSwish:
            return x * fmaxf(0.0f, fminf(1.0f, x * (1.0f / 6.0f) + 0.5f));
    }
    return x;
}

}  // namespace voxseg::engine
