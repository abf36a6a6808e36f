// Reference normalisations: InstanceNorm and GroupNorm (group statistics), BatchNorm (given
// statistics), LayerNorm (trailing axes) and the channel LayerNorm, in double.
#include "engine/reference/ops.h"

#include <cmath>

namespace voxseg::engine::reference {

// Instance norm (groups == channels) and group norm: statistics over each group's channels
// and all spatial positions, then per-channel scale and bias.
void groupNorm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups, float eps,
               Tensor& y) {
    const int64_t N = x.dim(0), C = x.dim(1);
    const int64_t plane = x.numel() / (N * C);
    const int64_t cpg = C / groups;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const std::vector<float> sc = scale.toFloats(), bi = bias.toFloats();
    for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t g = 0; g < groups; ++g) {
            const float* base = xp + (nn * C + g * cpg) * plane;
            const int64_t count = cpg * plane;
            double sum = 0;
            for (int64_t i = 0; i < count; ++i) sum += base[i];
            const double mean = sum / static_cast<double>(count);
            double sq = 0;
            for (int64_t i = 0; i < count; ++i) sq += (base[i] - mean) * (base[i] - mean);
            const double inv = 1.0 / std::sqrt(sq / static_cast<double>(count) + eps);
            for (int64_t cc = 0; cc < cpg; ++cc) {
                const int64_t c = g * cpg + cc;
                for (int64_t i = 0; i < plane; ++i) {
                    const int64_t idx = (nn * C + c) * plane + i;
                    yp[idx] = static_cast<float>((xp[idx] - mean) * inv * sc[c] + bi[c]);
                }
            }
        }
}

void batchNorm(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) {
    const Tensor& x = *in[0];
    const int64_t N = x.dim(0), C = x.dim(1), plane = x.numel() / (N * C);
    const std::vector<float> sc = in[1]->toFloats(), bi = in[2]->toFloats(),
                             mean = in[3]->toFloats(), var = in[4]->toFloats();
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t c = (i / plane) % C;
        yp[i] = static_cast<float>(
            (xp[i] - mean[c]) / std::sqrt(double(var[c]) + n.norm.epsilon) * sc[c] + bi[c]);
    }
}

// Normalises each of the prod(shape[:axis]) rows over the trailing prod(shape[axis:]) values.
void layerNorm(const Node& n, const Tensor& x, const Tensor& scale, const Tensor* bias, Tensor& y) {
    int64_t inner = 1;
    for (size_t i = static_cast<size_t>(n.axis); i < x.shape().size(); ++i) inner *= x.dim(i);
    const int64_t outer = x.numel() / inner;
    const float* xp = x.data<float>();
    const float* sp = scale.data<float>();
    const float* bp = bias ? bias->data<float>() : nullptr;
    float* yp = y.data<float>();
    for (int64_t o = 0; o < outer; ++o) {
        const float* row = xp + o * inner;
        double sum = 0;
        for (int64_t i = 0; i < inner; ++i) sum += row[i];
        const double mean = sum / static_cast<double>(inner);
        double sq = 0;
        for (int64_t i = 0; i < inner; ++i) sq += (row[i] - mean) * (row[i] - mean);
        const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + n.norm.epsilon);
        for (int64_t i = 0; i < inner; ++i)
            yp[o * inner + i] =
                static_cast<float>((row[i] - mean) * inv * sp[i] + (bp ? bp[i] : 0.0));
    }
}

// Normalises the C values of each (n, position) of an [N, C, ...] tensor.
void channelLayerNorm(const Node& n, const Tensor& x, const Tensor& scale, const Tensor* bias,
                      Tensor& y) {
    const int64_t batch = x.dim(0), channels = x.dim(1);
    const int64_t spatial = x.numel() / (batch * channels);
    const float* sp = scale.data<float>();
    const float* bp = bias ? bias->data<float>() : nullptr;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < spatial; ++s) {
            const float* xp = x.data<float>() + b * channels * spatial + s;
            float* yp = y.data<float>() + b * channels * spatial + s;
            double sum = 0;
            for (int64_t c = 0; c < channels; ++c) sum += xp[c * spatial];
            const double mean = sum / static_cast<double>(channels);
            double sq = 0;
            for (int64_t c = 0; c < channels; ++c)
                sq += (xp[c * spatial] - mean) * (xp[c * spatial] - mean);
            const double inv = 1.0 / std::sqrt(sq / static_cast<double>(channels) + n.norm.epsilon);
            for (int64_t c = 0; c < channels; ++c)
                yp[c * spatial] =
                    static_cast<float>((xp[c * spatial] - mean) * inv * sp[c] + (bp ? bp[c] : 0.0));
        }
}

}  // namespace voxseg::engine::reference
