#include "pipeline/scipy_zoom.h"

#include "pipeline/pixel_dispatch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

// Bit-exact parity with scipy needs every product and sum rounded on its own, never a fused
// multiply-add (which GCC would form on FMA targets, e.g. aarch64 or -march=native):
// pipeline/CMakeLists.txt compiles this file with -ffp-contract=off.

namespace voxseg::pipeline {

std::array<int64_t, 3> scipyZoomShape(const std::array<int64_t, 3>& in,
                                      const std::array<double, 3>& zoom) {
    std::array<int64_t, 3> out{};
    for (size_t a = 0; a < 3; ++a) {
        // Python's round(): to nearest, ties to even; nearbyint does that in the default
        // rounding mode.
        out[a] = static_cast<int64_t>(std::nearbyint(static_cast<double>(in[a]) * zoom[a]));
    }
    return out;
}

std::array<double, 3> scipyZoomStep(const std::array<int64_t, 3>& in,
                                    const std::array<int64_t, 3>& out) {
    std::array<double, 3> step{};
    for (size_t a = 0; a < 3; ++a) {
        // np.divide(in - 1, out - 1, where=out - 1 != 0), ones elsewhere.
        const int64_t div = out[a] - 1;
        step[a] = div != 0 ? static_cast<double>(in[a] - 1) / static_cast<double>(div) : 1.0;
    }
    return step;
}

Geometry scipyZoomGeometry(const Geometry& in, const std::array<double, 3>& zoom) {
    Geometry out = in;
    out.size = scipyZoomShape(in.size, zoom);
    for (size_t a = 0; a < 3; ++a) out.spacing[a] = in.spacing[a] / zoom[a];
    return out;
}

namespace {

// One axis's taps: order 0 uses index0 only.
struct AxisTaps {
    std::vector<int64_t> index0, index1;
    std::vector<double> weight0, weight1;
};

// NI_ZoomShift's per-axis tables (mode "nearest": taps beyond the edge clamp to it) and
// get_spline_interpolation_weights for order 1.
AxisTaps axisTaps(int64_t n_in, int64_t n_out, double step, int order) {
    AxisTaps t;
    const auto n = static_cast<size_t>(n_out);
    t.index0.resize(n);
    if (order == 1) {
        t.index1.resize(n);
        t.weight0.resize(n);
        t.weight1.resize(n);
    }
    for (size_t o = 0; o < n; ++o) {
        const double cc = static_cast<double>(o) * step;
        if (order == 0) {
            const auto start = static_cast<int64_t>(std::floor(cc + 0.5));
            t.index0[o] = std::clamp<int64_t>(start, 0, n_in - 1);
            continue;
        }
        const double fl = std::floor(cc);
        const auto start = static_cast<int64_t>(fl);
        t.index0[o] = std::clamp<int64_t>(start, 0, n_in - 1);
        t.index1[o] = std::clamp<int64_t>(start + 1, 0, n_in - 1);
        const double x = cc - fl;
        t.weight0[o] = 1.0 - x;
        t.weight1[o] = 1.0 - t.weight0[o];  // scipy: the last weight is 1 minus the others
    }
    return t;
}

// Runs fn(k_begin, k_end) over the output slices on `threads` threads (0 = every core).
template <typename Fn>
void forSlices(int64_t slices, int threads, Fn&& fn) {
    int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    n = static_cast<int>(std::clamp<int64_t>(n, 1, slices));
    if (n == 1) {
        fn(int64_t{0}, slices);
        return;
    }
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t)
        pool.emplace_back([&fn, slices, n, t] { fn(slices * t / n, slices * (t + 1) / n); });
    for (auto& th : pool) th.join();
}

// numpy's float64 -> int32 cast: truncation; x86 gives INT32_MIN for NaN and out-of-range.
int32_t truncateToInt32(double t) {
    if (!(t > -2147483649.0 && t < 2147483648.0)) return std::numeric_limits<int32_t>::min();
    return static_cast<int32_t>(t);
}

template <typename Out>
Out storeValue(double t) {
    if constexpr (std::is_same_v<Out, int32_t>) {
        return truncateToInt32(t);
    } else {
        return static_cast<Out>(t);
    }
}

template <typename In, typename Out>
void linearKernel(const In* src, const std::array<int64_t, 3>& in_size, Out* dst,
                  const std::array<int64_t, 3>& out_size, const std::array<AxisTaps, 3>& taps,
                  int threads) {
    const int64_t sx = 1, sy = in_size[0], sz = in_size[0] * in_size[1];
    forSlices(out_size[2], threads, [&](int64_t k_begin, int64_t k_end) {
        for (int64_t k = k_begin; k < k_end; ++k) {
            const auto ku = static_cast<size_t>(k);
            const int64_t zk[2] = {taps[2].index0[ku] * sz, taps[2].index1[ku] * sz};
            const double wk[2] = {taps[2].weight0[ku], taps[2].weight1[ku]};
            for (int64_t j = 0; j < out_size[1]; ++j) {
                const auto ju = static_cast<size_t>(j);
                const int64_t yj[2] = {taps[1].index0[ju] * sy, taps[1].index1[ju] * sy};
                const double wj[2] = {taps[1].weight0[ju], taps[1].weight1[ju]};
                Out* row = dst + (k * out_size[1] + j) * out_size[0];
                for (int64_t i = 0; i < out_size[0]; ++i) {
                    const auto iu = static_cast<size_t>(i);
                    const int64_t xi[2] = {taps[0].index0[iu] * sx, taps[0].index1[iu] * sx};
                    const double wi[2] = {taps[0].weight0[iu], taps[0].weight1[iu]};
                    // NI_ZoomShift's filter loop: the first axis slowest, the last fastest;
                    // the value times the weights in axis order, summed from 0.0.
                    double t = 0.0;
                    for (int a = 0; a < 2; ++a)
                        for (int b = 0; b < 2; ++b)
                            for (int c = 0; c < 2; ++c) {
                                double coeff = static_cast<double>(src[xi[a] + yj[b] + zk[c]]);
                                coeff *= wi[a];
                                coeff *= wj[b];
                                coeff *= wk[c];
                                t += coeff;
                            }
                    row[i] = storeValue<Out>(t);
                }
            }
        }
    });
}

template <typename T>
void nearestKernel(const T* src, const std::array<int64_t, 3>& in_size, T* dst,
                   const std::array<int64_t, 3>& out_size, const std::array<AxisTaps, 3>& taps,
                   int threads) {
    const int64_t sy = in_size[0], sz = in_size[0] * in_size[1];
    const std::vector<int64_t>& xi = taps[0].index0;
    forSlices(out_size[2], threads, [&](int64_t k_begin, int64_t k_end) {
        for (int64_t k = k_begin; k < k_end; ++k) {
            const int64_t zk = taps[2].index0[static_cast<size_t>(k)] * sz;
            for (int64_t j = 0; j < out_size[1]; ++j) {
                const T* line = src + zk + taps[1].index0[static_cast<size_t>(j)] * sy;
                T* row = dst + (k * out_size[1] + j) * out_size[0];
                for (int64_t i = 0; i < out_size[0]; ++i) {
                    const T v = line[xi[static_cast<size_t>(i)]];
                    if constexpr (std::is_floating_point_v<T>) {
                        row[i] = static_cast<T>(0.0 + static_cast<double>(v));  // t = 0.0 + v
                    } else {
                        row[i] = v;  // integers pass float64 and back unchanged
                    }
                }
            }
        }
    });
}

Status checkSizes(const Volume& in, const std::array<int64_t, 3>& out_size, const char* what) {
    if (in.empty()) return invalidArgument(std::string(what) + ": empty volume");
    for (int64_t n : out_size)
        if (n < 1)
            return invalidArgument(
                std::string(what) + ": output size " + std::to_string(out_size[0]) + "x" +
                    std::to_string(out_size[1]) + "x" + std::to_string(out_size[2]) +
                    " has an empty axis (zoom too small for the volume)",
                in.info().source);
    return Status::ok();
}

Geometry outputGeometry(const Geometry& in, const std::array<int64_t, 3>& out_size,
                        const ZoomOptions& options) {
    std::array<double, 3> zoom{};
    for (size_t a = 0; a < 3; ++a)
        zoom[a] = static_cast<double>(out_size[a]) / static_cast<double>(in.size[a]);
    Geometry out = scipyZoomGeometry(in, options.zoom.value_or(zoom));
    out.size = out_size;
    return out;
}

std::array<AxisTaps, 3> allTaps(const std::array<int64_t, 3>& in_size,
                                const std::array<int64_t, 3>& out_size, int order) {
    const std::array<double, 3> step = scipyZoomStep(in_size, out_size);
    return {axisTaps(in_size[0], out_size[0], step[0], order),
            axisTaps(in_size[1], out_size[1], step[1], order),
            axisTaps(in_size[2], out_size[2], step[2], order)};
}

}  // namespace

Result<Volume> zoomLinear(const Volume& in, const std::array<int64_t, 3>& out_size,
                          ZoomValues values, const ZoomOptions& options) {
    VOXSEG_RETURN_IF_ERROR(checkSizes(in, out_size, "zoomLinear"));
    const Geometry in_g = in.geometry();
    const Geometry out_g = outputGeometry(in_g, out_size, options);
    const std::array<AxisTaps, 3> taps = allTaps(in_g.size, out_size, 1);
    auto run = [&](auto out_tag) {
        using Out = decltype(out_tag);
        Volume out = Volume::allocateUninitialized<Out>(out_g, in.info());
        withPixelType(in.pixelType(), [&](auto in_tag) {
            using In = decltype(in_tag);
            linearKernel<In, Out>(in.data<In>(), in_g.size, out.data<Out>(), out_size, taps,
                                  options.threads);
        });
        return out;
    };
    switch (values) {
        case ZoomValues::kFloat64:
            return run(double{});
        case ZoomValues::kFloat32:
            return run(float{});
        case ZoomValues::kInt32:
            return run(int32_t{});
    }
    return invalidArgument("zoomLinear: unknown ZoomValues");
}

Result<Volume> zoomNearest(const Volume& labels, const std::array<int64_t, 3>& out_size,
                           const ZoomOptions& options) {
    VOXSEG_RETURN_IF_ERROR(checkSizes(labels, out_size, "zoomNearest"));
    const Geometry in_g = labels.geometry();
    const Geometry out_g = outputGeometry(in_g, out_size, options);
    const std::array<AxisTaps, 3> taps = allTaps(in_g.size, out_size, 0);
    return withPixelType(labels.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        Volume out = Volume::allocateUninitialized<T>(out_g, labels.info());
        nearestKernel<T>(labels.data<T>(), in_g.size, out.data<T>(), out_size, taps,
                         options.threads);
        return out;
    });
}

}  // namespace voxseg::pipeline
