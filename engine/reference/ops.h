// Internal to the reference backend (not a public header): the plain-loop op functions, one
// file per op family (conv.cpp, norm.cpp, elementwise.cpp, reduce.cpp, matmul.cpp, pool.cpp,
// resize.cpp, shape_ops.cpp, attention.cpp), and the small index helpers they share. Every
// function reads float32 row-major inputs and writes `y`, already allocated in the node's output
// shape; reference_backend.cpp dispatches to them.
#pragma once

#include "engine/backend.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace voxseg::engine::reference {

// Spatial extent padded to three axes (D, H, W); 1D/2D tensors get leading 1s.
struct Dims3 {
    int64_t d = 1, h = 1, w = 1;
    int64_t size() const { return d * h * w; }
};

inline Dims3 spatial3(const Shape& s) {
    Dims3 r;
    const size_t sr = s.size() - 2;
    if (sr >= 1) r.w = s[s.size() - 1];
    if (sr >= 2) r.h = s[s.size() - 2];
    if (sr >= 3) r.d = s[s.size() - 3];
    return r;
}

// Per-axis attribute padded to three axes with `fill` for the missing leading axes.
inline std::array<int64_t, 3> pad3(const std::vector<int64_t>& v, int64_t fill) {
    std::array<int64_t, 3> r{fill, fill, fill};
    const size_t off = 3 - v.size();
    for (size_t i = 0; i < v.size(); ++i) r[off + i] = v[i];
    return r;
}

// Strides (in elements) of a row-major shape.
inline std::vector<int64_t> stridesOf(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// conv.cpp
void conv(const Node& n, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y);
void convTranspose(const Node& n, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y);
// SubpixelAdd (op_kind.h): the folded up-sampling's parities added into the skip convolution.
void subpixelAdd(const Node& n, const Tensor& p, const Tensor& skip, const Tensor* corr, Tensor& y);

// norm.cpp
void groupNorm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups, float eps,
               Tensor& y);
void batchNorm(const Node& n, const std::vector<const Tensor*>& in, Tensor& y);
void layerNorm(const Node& n, const Tensor& x, const Tensor& scale, const Tensor* bias, Tensor& y);
void channelLayerNorm(const Node& n, const Tensor& x, const Tensor& scale, const Tensor* bias,
                      Tensor& y);

// elementwise.cpp
// Relu, LeakyRelu, Sigmoid, Tanh, Clip, Erf, Gelu, Silu, Sqrt, Sin, Cos.
void unary(const Node& n, const Tensor& x, Tensor& y);
void binary(OpKind op, const Tensor& a, const Tensor& b, Tensor& y);  // Add, Sub, Mul, Div
void prelu(const Tensor& x, const Tensor& slope, Tensor& y);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y);
void applyEpilogue(const Node& n, const std::vector<Tensor>& env, Tensor& y);

// reduce.cpp
void reduce(const Node& n, const Tensor& x, Tensor& y);  // ReduceMean, ReduceSum, ReduceMax
void softmax(int64_t axis, const Tensor& x, Tensor& y);

// matmul.cpp
void matmul(const Tensor& a, const Tensor& b, const Tensor* bias, Tensor& y);

// pool.cpp
void pool(const Node& n, const Tensor& x, Tensor& y);  // MaxPool, AveragePool
void globalAveragePool(const Tensor& x, Tensor& y);

// resize.cpp
void resize(const Node& n, const Tensor& x, Tensor& y);

// shape_ops.cpp
void copy(const Tensor& x, Tensor& y);  // Identity, Reshape
void concat(int64_t axis, const std::vector<const Tensor*>& in, Tensor& y);
void pad(const Node& n, const Tensor& x, Tensor& y);
void transpose(const Node& n, const Tensor& x, Tensor& y);
void slice(const Node& n, const Tensor& x, Tensor& y);
void expand(const Tensor& x, Tensor& y);
void tile(const Tensor& x, Tensor& y);
void roll(const Tensor& x, const std::vector<int64_t>& shifts, Tensor& y);

// attention.cpp
void attention(const Node& n, const std::vector<const Tensor*>& in, Tensor& y);
void multiHeadAttention(const Node& n, const std::vector<const Tensor*>& in, Tensor& y);
void rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y);

}  // namespace voxseg::engine::reference
