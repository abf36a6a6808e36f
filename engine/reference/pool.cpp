// Reference pooling: MaxPool and AveragePool windows (ONNX padding and count_include_pad
// rules) and GlobalAveragePool, in double.
#include "engine/reference/ops.h"

#include <algorithm>
#include <limits>

namespace voxseg::engine::reference {

void pool(const Node& n, const Tensor& x, Tensor& y) {
    const PoolAttrs& pa = n.pool;
    const int64_t NC = x.dim(0) * x.dim(1);
    const Dims3 is = spatial3(x.shape()), os = spatial3(y.shape());
    const auto k = pad3(pa.kernel, 1), s = pad3(pa.strides, 1), dl = pad3(pa.dilations, 1),
               p = pad3(pa.pads_begin, 0), pe = pad3(pa.pads_end, 0);
    const bool is_max = n.op == OpKind::kMaxPool;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const std::array<int64_t, 3> in_dims{is.d, is.h, is.w};
    for (int64_t c = 0; c < NC; ++c)
        for (int64_t od = 0; od < os.d; ++od)
            for (int64_t oh = 0; oh < os.h; ++oh)
                for (int64_t ow = 0; ow < os.w; ++ow) {
                    const std::array<int64_t, 3> o{od, oh, ow};
                    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
                    int64_t valid = 0;
                    int64_t padded = 1;  // window positions inside input + padding
                    for (int a = 0; a < 3; ++a) {
                        int64_t cnt = 0;
                        for (int64_t kk = 0; kk < k[a]; ++kk) {
                            const int64_t i = o[a] * s[a] - p[a] + kk * dl[a];
                            if (i < in_dims[a] + pe[a]) ++cnt;
                        }
                        padded *= cnt;
                    }
                    for (int64_t kd = 0; kd < k[0]; ++kd) {
                        const int64_t id = od * s[0] - p[0] + kd * dl[0];
                        if (id < 0 || id >= is.d) continue;
                        for (int64_t kh = 0; kh < k[1]; ++kh) {
                            const int64_t ih = oh * s[1] - p[1] + kh * dl[1];
                            if (ih < 0 || ih >= is.h) continue;
                            for (int64_t kw = 0; kw < k[2]; ++kw) {
                                const int64_t iw = ow * s[2] - p[2] + kw * dl[2];
                                if (iw < 0 || iw >= is.w) continue;
                                const float v = xp[((c * is.d + id) * is.h + ih) * is.w + iw];
                                acc = is_max ? std::max<double>(acc, v) : acc + v;
                                ++valid;
                            }
                        }
                    }
                    if (!is_max) {
                        const int64_t div = pa.count_include_pad ? padded : valid;
                        acc = div > 0 ? acc / double(div) : 0.0;
                    }
                    yp[((c * os.d + od) * os.h + oh) * os.w + ow] = static_cast<float>(acc);
                }
}

// The mean of each channel's plane, in double.
void globalAveragePool(const Tensor& x, Tensor& y) {
    const int64_t nc = y.numel();
    const int64_t plane = x.numel() / nc;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t c = 0; c < nc; ++c) {
        double sum = 0;
        for (int64_t i = 0; i < plane; ++i) sum += xp[c * plane + i];
        yp[c] = static_cast<float>(sum / double(plane));
    }
}

}  // namespace voxseg::engine::reference
