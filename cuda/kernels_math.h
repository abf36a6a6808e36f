// Per-element math of the CUDA kernels, as __host__ __device__ functions so that CPU unit tests
// (tests/cuda/kernels_math_test.cpp) cover the logic without a GPU. Kernels in kernels.cu only
// index memory and call these.
//
// Everything here is pure (no state, no allocation); thread-safe. Units: voxels and channels;
// statistics in float32 whatever the storage precision.
#pragma once

#include "engine/graph/unary_math.h"

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define VOXSEG_HD __host__ __device__ __forceinline__
#else
#define VOXSEG_HD inline
#endif

namespace voxseg::cuda::math {

// Activation applied by the fused epilogue kernel (mirrors engine::ActivationKind plus the
// plain elementwise ops the graph may contain on their own).
enum class Act : int { kNone = 0, kRelu, kLeakyRelu, kPRelu, kSigmoid, kTanh, kClip, kSilu };

// `alpha` is the LeakyReLU slope or the PReLU slope of this channel; clip uses [lo, hi].
VOXSEG_HD float activate(float x, Act act, float alpha, float lo, float hi) {
    switch (act) {
        case Act::kNone:
            return x;
        case Act::kRelu:
            return x > 0.0f ? x : 0.0f;
        case Act::kLeakyRelu:
        case Act::kPRelu:
            return x >= 0.0f ? x : alpha * x;
        case Act::kSigmoid:
            return 1.0f / (1.0f + expf(-x));
        case Act::kTanh:
            return tanhf(x);
        case Act::kClip:
            return x < lo ? lo : (x > hi ? hi : x);
        case Act::kSilu:
            return x / (1.0f + expf(-x));
    }
    return x;
}

// Fused epilogue: act(x * scale + shift + residual). InstanceNorm folds mean/rstd/gamma/beta
// into (scale, shift); a conv bias is (1, bias); a residual Add passes `residual`.
VOXSEG_HD float epilogue(float x, float scale, float shift, float residual, Act act, float alpha,
                         float lo, float hi) {
    return activate(fmaf(x, scale, shift) + residual, act, alpha, lo, hi);
}

// Running statistics of a chunk: count, mean and sum of squared deviations (M2). Chunks are
// combined with Chan et al.'s parallel formula, which stays accurate where E[x^2] - E[x]^2 in
// float32 would cancel catastrophically (2M voxels of one channel).
struct Moments {
    float count;
    float mean;
    float m2;
};

VOXSEG_HD Moments combineMoments(Moments a, Moments b) {
    if (a.count == 0.0f) return b;
    if (b.count == 0.0f) return a;
    const float n = a.count + b.count;
    const float delta = b.mean - a.mean;
    const float frac_b = b.count / n;
    Moments r;
    r.count = n;
    r.mean = a.mean + delta * frac_b;
    r.m2 = a.m2 + b.m2 + delta * delta * a.count * frac_b;
    return r;
}

// InstanceNorm as an affine map: y = x * scale + shift with scale = gamma / sqrt(var + eps),
// shift = beta - mean * scale. Variance is the biased (population) one, as ONNX and PyTorch use.
struct Affine {
    float scale;
    float shift;
};

VOXSEG_HD Affine normAffine(Moments m, float gamma, float beta, float epsilon) {
    const float var = m.count > 0.0f ? fmaxf(m.m2 / m.count, 0.0f) : 0.0f;
    const float rstd = 1.0f / sqrtf(var + epsilon);
    Affine a;
    a.scale = gamma * rstd;
    a.shift = beta - m.mean * a.scale;
    return a;
}

// Index of the largest value of `n` values at stride `stride` (first one wins ties; NaN never
// wins over a number).
template <typename T>
VOXSEG_HD int argmaxStrided(const T* v, int n, int64_t stride) {
    int best = 0;
    float best_value = static_cast<float>(v[0]);
    for (int k = 1; k < n; ++k) {
        const float x = static_cast<float>(v[k * stride]);
        if (x > best_value || (best_value != best_value && x == x)) {
            best_value = x;
            best = k;
        }
    }
    return best;
}

// Element offset of channel c of spatial position s in image n of a channels-last (NDHWC)
// tensor whose rows hold `ldc` channels (ldc > channels when the tensor is a slice of a
// concatenation or zero-padded for tensor cores), starting at channel `c_offset`.
VOXSEG_HD int64_t channelsLastOffset(int64_t n, int64_t s, int64_t c, int64_t spatial, int64_t ldc,
                                     int64_t c_offset) {
    return (n * spatial + s) * ldc + c_offset + c;
}

// Channels rounded up to what tensor-core convolutions want in fp16/bf16 (multiples of 8).
VOXSEG_HD int64_t paddedChannels(int64_t c, bool half_precision) {
    return half_precision ? (c + 7) / 8 * 8 : c;
}

// Test-time mirroring in the sliding window: patch index i along an axis of n voxels reads (and
// its output writes back to) index n - 1 - i when the axis is mirrored. `flip` bit a (1 << a)
// mirrors spatial axis a (0 = D, 1 = H, 2 = W).
VOXSEG_HD int64_t mirrored(int64_t i, int64_t n, int flip, int axis) {
    return (flip >> axis) & 1 ? n - 1 - i : i;
}

// ---- tensor ops (transformer layers; tensor_kernels.h) ----

// Element-wise ops of the generic tensor kernel: unary ops read `a`, binary ops `a` and `b`,
// kWhere reads condition `a` (nonzero: take b) and `b`, `c`. kPRelu: a >= 0 ? a : a * b.
enum class EltOp : int {
    kCopy = 0,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kPRelu,
    kWhere,
    kGeluExact,
    kGeluTanh,
    kSilu,
    kRelu,
    kLeakyRelu,  // slope alpha
    kSigmoid,
    kTanh,
    kClip,  // [lo, hi]
    // The ops whose formula is engine::unaryValue (engine/graph/unary_math.h, shared with every
    // backend): kUnaryMath + the UnaryFn, parameters alpha and beta (beta passed as lo).
    kUnaryMath = 64,
};

VOXSEG_HD EltOp unaryMathOp(engine::UnaryFn fn) {
    return static_cast<EltOp>(static_cast<int>(EltOp::kUnaryMath) + static_cast<int>(fn));
}

// How many operands `op` reads (1, 2 or 3).
VOXSEG_HD int eltArity(EltOp op) {
    switch (op) {
        case EltOp::kAdd:
        case EltOp::kSub:
        case EltOp::kMul:
        case EltOp::kDiv:
        case EltOp::kPRelu:
            return 2;
        case EltOp::kWhere:
            return 3;
        default:
            return 1;
    }
}

// Exact GELU x * Phi(x) and its tanh approximation (ONNX Gelu, PyTorch approximate="tanh").
VOXSEG_HD float geluExact(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
VOXSEG_HD float geluTanh(float x) {
    const float k = 0.79788456080286536f;  // sqrt(2 / pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

VOXSEG_HD float eltwise(EltOp op, float a, float b, float c, float alpha, float lo, float hi) {
    switch (op) {
        case EltOp::kCopy:
            return a;
        case EltOp::kAdd:
            return a + b;
        case EltOp::kSub:
            return a - b;
        case EltOp::kMul:
            return a * b;
        case EltOp::kDiv:
            return a / b;
        case EltOp::kPRelu:
            return a >= 0.0f ? a : a * b;
        case EltOp::kWhere:
            return a != 0.0f ? b : c;
        case EltOp::kGeluExact:
            return geluExact(a);
        case EltOp::kGeluTanh:
            return geluTanh(a);
        case EltOp::kSilu:
            return activate(a, Act::kSilu, 0.0f, 0.0f, 0.0f);
        case EltOp::kRelu:
            return activate(a, Act::kRelu, 0.0f, 0.0f, 0.0f);
        case EltOp::kLeakyRelu:
            return activate(a, Act::kLeakyRelu, alpha, 0.0f, 0.0f);
        case EltOp::kSigmoid:
            return activate(a, Act::kSigmoid, 0.0f, 0.0f, 0.0f);
        case EltOp::kTanh:
            return activate(a, Act::kTanh, 0.0f, 0.0f, 0.0f);
        case EltOp::kClip:
            return activate(a, Act::kClip, 0.0f, lo, hi);
        case EltOp::kUnaryMath:
            break;
    }
    if (static_cast<int>(op) >= static_cast<int>(EltOp::kUnaryMath))
        return engine::unaryValue(static_cast<engine::UnaryFn>(static_cast<int>(op) -
                                                               static_cast<int>(EltOp::kUnaryMath)),
                                  a, alpha, lo);
    return a;
}

// Strided addressing of the tensor kernels: element `flat` (row-major over `shape`, `rank` axes)
// lives at sum over axes of (index % mod[a]) * strides[a]. With mod = shape that is a strided
// view (a transpose, a slice, a channels-last activation); mod[a] = 1 (stride ignored) broadcasts
// an axis (Expand, numpy broadcasting) and mod[a] < shape[a] repeats it (Tile).
VOXSEG_HD int64_t stridedOffset(int64_t flat, int rank, const int64_t* shape, const int64_t* mod,
                                const int64_t* strides) {
    int64_t offset = 0;
    for (int a = rank - 1; a >= 0; --a) {
        const int64_t i = flat % shape[a];
        flat /= shape[a];
        offset += (i % mod[a]) * strides[a];
    }
    return offset;
}

// Rotary embedding of interleaved pairs (EVA / Primus): element i of a row-major [..., T, D]
// tensor x with tables cos/sin of `table` (= T * D) values. Even positions pair with the next
// element (rot = -x[i + 1]), odd ones with the previous (rot = x[i - 1]).
VOXSEG_HD float rotary(const float* x, int64_t i, int64_t d, const float* cos_table,
                       const float* sin_table, int64_t table) {
    const int64_t j = i % table;
    const float rot = (i % d) % 2 == 0 ? -x[i + 1] : x[i - 1];
    return x[i] * cos_table[j] + rot * sin_table[j];
}

// Average/max pooling window of one output position along one axis: the input indices
// o * stride - pad + k (k < kernel) that fall inside [0, in) count as `valid`; those inside the
// padded extent [-pad, in + pad_end) count for count_include_pad (ONNX AveragePool rules, as the
// reference backend computes them).
struct PoolWindow {
    int64_t begin, end;  // valid input indices [begin, end) (dilation 1)
    int64_t padded;      // window positions inside input + padding
};

VOXSEG_HD PoolWindow poolWindow(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t pad_end) {
    PoolWindow w;
    const int64_t first = o * stride - pad;
    w.begin = first < 0 ? 0 : first;
    w.end = first + kernel < in ? first + kernel : in;
    if (w.end < w.begin) w.end = w.begin;
    int64_t padded = 0;
    for (int64_t k = 0; k < kernel; ++k) padded += first + k < in + pad_end ? 1 : 0;
    w.padded = padded;
    return w;
}

}  // namespace voxseg::cuda::math
