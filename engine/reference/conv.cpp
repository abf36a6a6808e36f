// Reference Conv and ConvTranspose: direct loops over every output (Conv) or input
// (ConvTranspose) voxel with double accumulators.
#include "engine/reference/ops.h"

namespace voxseg::engine::reference {

void conv(const Node& n, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
    const ConvAttrs& a = n.conv;
    const int64_t N = x.dim(0), C = x.dim(1), M = y.dim(1), G = a.group;
    const Dims3 is = spatial3(x.shape()), os = spatial3(y.shape());
    const auto k = pad3(a.kernel, 1), s = pad3(a.strides, 1), dl = pad3(a.dilations, 1),
               p = pad3(a.pads_begin, 0);
    const int64_t cg = C / G, mg = M / G;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    float* yp = y.data<float>();
    for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t m = 0; m < M; ++m) {
            const int64_t g = m / mg;
            for (int64_t od = 0; od < os.d; ++od)
                for (int64_t oh = 0; oh < os.h; ++oh)
                    for (int64_t ow = 0; ow < os.w; ++ow) {
                        double acc = b ? b->data<float>()[m] : 0.0;
                        for (int64_t c = 0; c < cg; ++c)
                            for (int64_t kd = 0; kd < k[0]; ++kd) {
                                const int64_t id = od * s[0] - p[0] + kd * dl[0];
                                if (id < 0 || id >= is.d) continue;
                                for (int64_t kh = 0; kh < k[1]; ++kh) {
                                    const int64_t ih = oh * s[1] - p[1] + kh * dl[1];
                                    if (ih < 0 || ih >= is.h) continue;
                                    for (int64_t kw = 0; kw < k[2]; ++kw) {
                                        const int64_t iw = ow * s[2] - p[2] + kw * dl[2];
                                        if (iw < 0 || iw >= is.w) continue;
                                        const float xv =
                                            xp[(((nn * C + g * cg + c) * is.d + id) * is.h + ih) *
                                                   is.w +
                                               iw];
                                        const float wv =
                                            wp[(((m * cg + c) * k[0] + kd) * k[1] + kh) * k[2] +
                                               kw];
                                        acc += static_cast<double>(xv) * wv;
                                    }
                                }
                            }
                        yp[(((nn * M + m) * os.d + od) * os.h + oh) * os.w + ow] =
                            static_cast<float>(acc);
                    }
        }
}

// Transposed convolution as a scatter: every input voxel adds weight * value to the outputs
// its kernel covers.
void convTranspose(const Node& n, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
    const ConvAttrs& a = n.conv;
    const int64_t N = x.dim(0), C = x.dim(1), M = y.dim(1), G = a.group;
    const Dims3 is = spatial3(x.shape()), os = spatial3(y.shape());
    const auto k = pad3(a.kernel, 1), s = pad3(a.strides, 1), dl = pad3(a.dilations, 1),
               p = pad3(a.pads_begin, 0);
    const int64_t cg = C / G, mg = M / G;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    std::vector<double> acc(static_cast<size_t>(y.numel()), 0.0);
    for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < C; ++c) {
            const int64_t g = c / cg;
            for (int64_t id = 0; id < is.d; ++id)
                for (int64_t ih = 0; ih < is.h; ++ih)
                    for (int64_t iw = 0; iw < is.w; ++iw) {
                        const double xv = xp[(((nn * C + c) * is.d + id) * is.h + ih) * is.w + iw];
                        for (int64_t mm = 0; mm < mg; ++mm) {
                            const int64_t m = g * mg + mm;
                            for (int64_t kd = 0; kd < k[0]; ++kd) {
                                const int64_t od = id * s[0] - p[0] + kd * dl[0];
                                if (od < 0 || od >= os.d) continue;
                                for (int64_t kh = 0; kh < k[1]; ++kh) {
                                    const int64_t oh = ih * s[1] - p[1] + kh * dl[1];
                                    if (oh < 0 || oh >= os.h) continue;
                                    for (int64_t kw = 0; kw < k[2]; ++kw) {
                                        const int64_t ow = iw * s[2] - p[2] + kw * dl[2];
                                        if (ow < 0 || ow >= os.w) continue;
                                        const float wv =
                                            wp[(((c * mg + mm) * k[0] + kd) * k[1] + kh) * k[2] +
                                               kw];
                                        acc[(((nn * M + m) * os.d + od) * os.h + oh) * os.w + ow] +=
                                            xv * wv;
                                    }
                                }
                            }
                        }
                    }
        }
    float* yp = y.data<float>();
    const int64_t plane = os.size();
    for (int64_t i = 0; i < y.numel(); ++i)
        yp[i] = static_cast<float>(acc[i] + (b ? b->data<float>()[(i / plane) % M] : 0.0));
}

void subpixelAdd(const Node& n, const Tensor& p, const Tensor& skip, const Tensor* corr,
                 Tensor& y) {
    const Shape& ys = skip.shape();
    const Shape& ps = p.shape();
    const std::vector<int64_t>& f = n.subpixel;
    const int64_t N = ys[0], O = ys[1];
    const float* pp = p.data<float>();
    const float* sp = skip.data<float>();
    const float* cp = corr ? corr->data<float>() : nullptr;
    float* yp = y.data<float>();
    for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t z = 0; z < ys[2]; ++z)
                for (int64_t h = 0; h < ys[3]; ++h)
                    for (int64_t w = 0; w < ys[4]; ++w) {
                        const int64_t at[3] = {z, h, w};
                        int64_t j[3], par[3], cls = 0;
                        for (int a = 0; a < 3; ++a) {
                            par[a] = f[a] == 2 ? at[a] % 2 : 0;
                            j[a] = f[a] == 2 ? at[a] / 2 + par[a] : at[a];
                            cls = cls * 4 + (at[a] == 0 ? 1 : 0) + (at[a] == ys[2 + a] - 1 ? 2 : 0);
                        }
                        const int64_t g = (par[0] * f[1] + par[1]) * f[2] + par[2];
                        const int64_t yi = (((nn * O + o) * ys[2] + z) * ys[3] + h) * ys[4] + w;
                        const int64_t pi =
                            (((nn * ps[1] + g * O + o) * ps[2] + j[0]) * ps[3] + j[1]) * ps[4] +
                            j[2];
                        yp[yi] = sp[yi] + pp[pi] + (cp ? cp[cls * O + o] : 0.0f);
                    }
}

}  // namespace voxseg::engine::reference
