// Reference MatMul: numpy batch broadcasting, double accumulators, optional fused bias.
#include "engine/graph/broadcast.h"
#include "engine/reference/ops.h"

namespace voxseg::engine::reference {

// numpy matmul: batch dims broadcast, [M, K] x [K, N] per batch, double accumulators; then the
// optional bias [N] added along the last axis (in float, after the product is rounded).
void matmul(const Tensor& a, const Tensor& b, const Tensor* bias, Tensor& y) {
    const Shape& as = a.shape();
    const Shape& bs = b.shape();
    const Shape& ys = y.shape();
    const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
    const Shape batch(ys.begin(), ys.end() - 2);
    const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
    const float* ap = a.data<float>();
    const float* bp = b.data<float>();
    float* yp = y.data<float>();
    for (int64_t i = 0; i < numel(batch); ++i) {
        const float* am = ap + broadcastOffset(i, batch, a_batch) * M * K;
        const float* bm = bp + broadcastOffset(i, batch, b_batch) * K * N;
        float* ym = yp + i * M * N;
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += static_cast<double>(am[m * K + k]) * bm[k * N + n];
                ym[m * N + n] = static_cast<float>(acc);
            }
    }
    if (bias) {
        const float* biasp = bias->data<float>();
        for (int64_t i = 0; i < y.numel(); ++i) yp[i] += biasp[i % N];
    }
}

}  // namespace voxseg::engine::reference
