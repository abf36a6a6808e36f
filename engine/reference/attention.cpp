// Reference attention: Attention (K given transposed), MultiHeadAttention (packed heads)
// one query row at a time in double, and the interleaved-pair Rotary embedding.
#include "engine/graph/broadcast.h"
#include "engine/reference/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace voxseg::engine::reference {

namespace {

// softmax(Q Kt * scale + bias) V for `items` work items of Tq query rows, one row at a time;
// q(b, i, d), k(b, d, j), v(b, j, e) read the operands, out(b, i, e) is the output element,
// bias(b, i, j) the score's bias (0 without one).
template <typename Q, typename K, typename V, typename Out, typename Bias>
void attendRows(int64_t items, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv, float scale, Q q, K k,
                V v, Out out, Bias bias) {
    std::vector<double> row(static_cast<size_t>(Tk));
    for (int64_t b = 0; b < items; ++b)
        for (int64_t i = 0; i < Tq; ++i) {
            double mx = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j < Tk; ++j) {
                double acc = 0;
                for (int64_t d = 0; d < D; ++d) acc += double(q(b, i, d)) * k(b, d, j);
                row[j] = acc * scale + bias(b, i, j);
                mx = std::max(mx, row[j]);
            }
            double sum = 0;
            for (int64_t j = 0; j < Tk; ++j) sum += row[j] = std::exp(row[j] - mx);
            for (int64_t e = 0; e < Dv; ++e) {
                double acc = 0;
                for (int64_t j = 0; j < Tk; ++j) acc += row[j] * v(b, j, e);
                out(b, i, e) = static_cast<float>(acc / sum);
            }
        }
}

// The sum of an attention node's biases (inputs 3 and 4, each optional) at a score's flat index
// in `scores`, each broadcast (batch axes also tiled) as broadcastOffset does.
class ScoreBiases {
  public:
    ScoreBiases(const std::vector<const Tensor*>& in, Shape scores) : scores_(std::move(scores)) {
        for (size_t i = 3; i < in.size(); ++i)
            if (in[i]) terms_.emplace_back(in[i]->toFloats(), in[i]->shape());
    }
    double at(int64_t flat) const {
        double sum = 0;
        for (const auto& [values, shape] : terms_)
            sum += values[static_cast<size_t>(broadcastOffset(flat, scores_, shape))];
        return sum;
    }

  private:
    Shape scores_;
    std::vector<std::pair<std::vector<float>, Shape>> terms_;
};

}  // namespace

// Attention on [..., T, D] operands, K given transposed.
void attention(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) {
    const Tensor &q = *in[0], &kt = *in[1], &v = *in[2];
    const Shape& qs = q.shape();
    const size_t r = qs.size();
    const int64_t Tq = qs[r - 2], D = qs[r - 1], Tk = kt.shape()[r - 1], Dv = v.shape()[r - 1];
    Shape scores = qs;
    scores[r - 1] = Tk;
    const ScoreBiases biases(in, scores);
    const float *qp = q.data<float>(), *kp = kt.data<float>(), *vp = v.data<float>();
    float* yp = y.data<float>();
    attendRows(
        q.numel() / (Tq * D), Tq, Tk, D, Dv, n.attention_scale,
        [&](int64_t b, int64_t i, int64_t d) { return qp[(b * Tq + i) * D + d]; },
        [&](int64_t b, int64_t d, int64_t j) { return kp[(b * D + d) * Tk + j]; },
        [&](int64_t b, int64_t j, int64_t e) { return vp[(b * Tk + j) * Dv + e]; },
        [&](int64_t b, int64_t i, int64_t e) -> float& { return yp[(b * Tq + i) * Dv + e]; },
        [&](int64_t b, int64_t i, int64_t j) { return biases.at((b * Tq + i) * Tk + j); });
}

// MultiHeadAttention: work item b is batch item b / H, head b % H of the packed [B, T, H*D] rows.
void multiHeadAttention(const Node& n, const std::vector<const Tensor*>& in, Tensor& y) {
    const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
    const int64_t B = q.dim(0), Tq = q.dim(1), Tk = k.dim(1), H = n.attention_heads;
    const int64_t D = q.dim(2) / H, Dv = v.dim(2) / H;
    const ScoreBiases biases(in, {B, H, Tq, Tk});
    const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
    float* yp = y.data<float>();
    auto at = [&](int64_t b, int64_t t, int64_t T, int64_t d, int64_t width) {
        return ((b / H) * T + t) * H * width + (b % H) * width + d;
    };
    attendRows(
        B * H, Tq, Tk, D, Dv, n.attention_scale,
        [&](int64_t b, int64_t i, int64_t d) { return qp[at(b, i, Tq, d, D)]; },
        [&](int64_t b, int64_t d, int64_t j) { return kp[at(b, j, Tk, d, D)]; },
        [&](int64_t b, int64_t j, int64_t e) { return vp[at(b, j, Tk, e, Dv)]; },
        [&](int64_t b, int64_t i, int64_t e) -> float& { return yp[at(b, i, Tq, e, Dv)]; },
        [&](int64_t b, int64_t i, int64_t j) { return biases.at((b * Tq + i) * Tk + j); });
}

// Interleaved-pair rotary embedding: y = x * cos + rotate(x) * sin, the tables [tokens, dim]
// repeated over the leading axes.
void rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y) {
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const std::vector<float> cs = cos.toFloats(), sn = sin.toFloats();
    const int64_t d = y.shape().back();
    const int64_t table = static_cast<int64_t>(cs.size());
    for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t j = i % table;
        const float rot = (i % d) % 2 == 0 ? -xp[i + 1] : xp[i - 1];
        yp[i] = xp[i] * cs[j] + rot * sn[j];
    }
}

}  // namespace voxseg::engine::reference
