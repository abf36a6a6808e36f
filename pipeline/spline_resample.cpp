#include "pipeline/spline_resample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>
#include <vector>

namespace voxseg::pipeline {

namespace {

// Lines filtered side by side: the recursions run across lanes, which the compiler vectorises.
constexpr int kLanes = 16;
// The cubic B-spline's pole and ITK's horizon for the initial causal coefficient (tolerance
// 1e-10: ceil(log(1e-10) / log(|z|)) = 18 terms).
const double kPole = std::sqrt(3.0) - 2.0;
constexpr int64_t kHorizon = 18;
// Edge samples scipy.ndimage pads a line with before its prefilter (_prepad_for_spline_filter).
constexpr int64_t kEdgePad = 12;

// Where the output samples of one axis read the input, and with which weights.
struct AxisPlan {
    bool skip = false;       // output samples are the input samples
    bool prefilter = false;  // spline: convert samples to coefficients first
    int taps = 0;            // 4 (spline) or 1 (nearest)
    int64_t pad = 0;         // edge samples before and after the line (kEdge splines)
    int64_t in_size = 0;
    int64_t out_size = 0;
    std::vector<int64_t> index;  // out_size * taps
    std::vector<float> weight;   // out_size * taps (0 outside the input)
};

// Whole-sample symmetric extension (ITK's mirror boundary), safe for any overshoot.
int64_t mirror(int64_t i, int64_t n) {
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

AxisPlan planAxis(int64_t in_size, int64_t out_size, const AxisSampling& map,
                  AxisInterpolation kind, SplineBoundary boundary) {
    AxisPlan plan;
    plan.in_size = in_size;
    plan.out_size = out_size;
    constexpr double kSameSample = 1e-6;
    if (in_size == out_size && std::abs(map.first) < kSameSample &&
        std::abs(map.step - 1.0) * static_cast<double>(in_size) < kSameSample) {
        plan.skip = true;
        return plan;
    }
    plan.taps = kind == AxisInterpolation::kSpline ? 4 : 1;
    plan.prefilter = kind == AxisInterpolation::kSpline && in_size > 1;
    if (kind == AxisInterpolation::kSpline && boundary == SplineBoundary::kEdge)
        plan.pad = kEdgePad;
    plan.index.assign(static_cast<size_t>(out_size * plan.taps), 0);
    plan.weight.assign(static_cast<size_t>(out_size * plan.taps), 0.f);
    for (int64_t o = 0; o < out_size; ++o) {
        const double q = map.at(o);
        int64_t* idx = &plan.index[static_cast<size_t>(o * plan.taps)];
        float* w = &plan.weight[static_cast<size_t>(o * plan.taps)];
        // ITK's ImageFunction::IsInsideBuffer; outside, every weight stays 0.
        if (!(q >= -0.5 && q < static_cast<double>(in_size) - 0.5)) continue;
        if (kind == AxisInterpolation::kNearest) {
            idx[0] = std::clamp<int64_t>(static_cast<int64_t>(std::floor(q + 0.5)), 0, in_size - 1);
            w[0] = 1.f;
            continue;
        }
        // Cubic B-spline weights of the 4 coefficients floor(q) - 1 .. floor(q) + 2.
        const double base = std::floor(q);
        const double t = q - base;
        const double w3 = t * t * t / 6.0;
        const double w0 = 1.0 / 6.0 + 0.5 * t * (t - 1.0) - w3;
        const double w2 = t + w0 - 2.0 * w3;
        const double w1 = 1.0 - w0 - w2 - w3;
        const double ws[4] = {w0, w1, w2, w3};
        for (int k = 0; k < 4; ++k) {
            // Indices into the padded line: base - 1 >= -2 and base + 2 <= in_size + 1.
            const int64_t i = static_cast<int64_t>(base) - 1 + k;
            idx[k] = plan.pad > 0 ? i + plan.pad : mirror(i, in_size);
            w[k] = static_cast<float>(ws[k]);
        }
    }
    return plan;
}

// Samples -> cubic B-spline coefficients along rows of `buf` ([n][kLanes]), as
// itk::BSplineDecompositionImageFilter does per line (gain 6, causal and anti-causal passes,
// mirror-symmetric initial values).
void prefilter(float* buf, int64_t n) {
    const float z = static_cast<float>(kPole);
    const float gain = static_cast<float>((1.0 - kPole) * (1.0 - 1.0 / kPole));
    for (int64_t e = 0; e < n * kLanes; ++e) buf[e] *= gain;
    // Initial causal coefficient.
    float first[kLanes];
    if (kHorizon < n) {
        std::copy(buf, buf + kLanes, first);
        double zn = kPole;
        for (int64_t m = 1; m < kHorizon; ++m, zn *= kPole) {
            const float zf = static_cast<float>(zn);
            const float* row = buf + m * kLanes;
            for (int l = 0; l < kLanes; ++l) first[l] += zf * row[l];
        }
    } else {
        const double iz = 1.0 / kPole;
        double zn = kPole;
        double z2n = std::pow(kPole, static_cast<double>(n - 1));
        double sum[kLanes];
        for (int l = 0; l < kLanes; ++l) sum[l] = buf[l] + z2n * buf[(n - 1) * kLanes + l];
        z2n *= z2n * iz;
        for (int64_t m = 1; m <= n - 2; ++m) {
            for (int l = 0; l < kLanes; ++l) sum[l] += (zn + z2n) * buf[m * kLanes + l];
            zn *= kPole;
            z2n *= iz;
        }
        for (int l = 0; l < kLanes; ++l) first[l] = static_cast<float>(sum[l] / (1.0 - zn * zn));
    }
    std::copy(first, first + kLanes, buf);
    for (int64_t m = 1; m < n; ++m) {
        float* row = buf + m * kLanes;
        const float* prev = row - kLanes;
        for (int l = 0; l < kLanes; ++l) row[l] += z * prev[l];
    }
    // Initial anti-causal coefficient, then the backward pass.
    const float scale = static_cast<float>(kPole / (kPole * kPole - 1.0));
    float* last = buf + (n - 1) * kLanes;
    const float* before = last - kLanes;
    for (int l = 0; l < kLanes; ++l) last[l] = scale * (z * before[l] + last[l]);
    for (int64_t m = n - 2; m >= 0; --m) {
        float* row = buf + m * kLanes;
        const float* next = row + kLanes;
        for (int l = 0; l < kLanes; ++l) row[l] = z * (next[l] - row[l]);
    }
}

struct Shape {
    std::array<int64_t, 3> size{};
    int64_t count() const { return size[0] * size[1] * size[2]; }
};

// Resamples axis `a` of `in` (shape `shape`) into `out` (same shape but plan.out_size along a).
// Lines along `a` are processed kLanes at a time: gathered into [n][kLanes], filtered, evaluated.
void resampleAxis(const float* in, const Shape& shape, int a, const AxisPlan& plan, float* out,
                  int threads) {
    int64_t inner = 1;
    for (int b = 0; b < a; ++b) inner *= shape.size[b];
    int64_t outer = 1;
    for (int b = a + 1; b < 3; ++b) outer *= shape.size[b];
    const int64_t n_in = plan.in_size, n_out = plan.out_size;
    const int64_t n_buf = n_in + 2 * plan.pad;  // the line with its edge padding
    const int64_t lines = inner * outer;
    const int64_t blocks = (lines + kLanes - 1) / kLanes;

    auto work = [&](int64_t block_begin, int64_t block_end) {
        std::vector<float> buf(static_cast<size_t>(n_buf * kLanes));
        std::vector<float> res(static_cast<size_t>(n_out * kLanes));
        int64_t in_base[kLanes], out_base[kLanes];
        for (int64_t b = block_begin; b < block_end; ++b) {
            const int64_t first_line = b * kLanes;
            const int lanes = static_cast<int>(std::min<int64_t>(kLanes, lines - first_line));
            for (int l = 0; l < kLanes; ++l) {
                // Short last block: repeat its last line (filtered, never stored).
                const int64_t line = first_line + std::min(l, lanes - 1);
                const int64_t o = line / inner, i = line % inner;
                in_base[l] = o * n_in * inner + i;
                out_base[l] = o * n_out * inner + i;
            }
            for (int64_t t = 0; t < n_buf; ++t) {
                const int64_t src = std::clamp<int64_t>(t - plan.pad, 0, n_in - 1);
                float* row = &buf[static_cast<size_t>(t * kLanes)];
                for (int l = 0; l < kLanes; ++l) row[l] = in[in_base[l] + src * inner];
            }
            if (plan.prefilter) prefilter(buf.data(), n_buf);
            for (int64_t o = 0; o < n_out; ++o) {
                float* dst = &res[static_cast<size_t>(o * kLanes)];
                const int64_t* idx = &plan.index[static_cast<size_t>(o * plan.taps)];
                const float* w = &plan.weight[static_cast<size_t>(o * plan.taps)];
                std::fill(dst, dst + kLanes, 0.f);
                for (int k = 0; k < plan.taps; ++k) {
                    const float* src = &buf[static_cast<size_t>(idx[k] * kLanes)];
                    const float wk = w[k];
                    for (int l = 0; l < kLanes; ++l) dst[l] += wk * src[l];
                }
            }
            for (int64_t o = 0; o < n_out; ++o) {
                const float* row = &res[static_cast<size_t>(o * kLanes)];
                for (int l = 0; l < lanes; ++l) out[out_base[l] + o * inner] = row[l];
            }
        }
    };
    int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    n = static_cast<int>(std::clamp<int64_t>(n, 1, blocks));
    if (n == 1) {
        work(0, blocks);
        return;
    }
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) pool.emplace_back(work, blocks * t / n, blocks * (t + 1) / n);
    for (auto& th : pool) th.join();
}

}  // namespace

AxisSampling axisSampling(const Geometry& source, const Geometry& target, int axis) {
    const auto a = static_cast<size_t>(axis);
    AxisSampling m;
    m.first = source.physicalToIndex(target.origin)[a];
    m.step = target.spacing[a] / source.spacing[a];
    m.scale = static_cast<double>(source.size[a]) / static_cast<double>(target.size[a]);
    m.field_of_view =
        std::abs(m.step - m.scale) < 1e-9 && std::abs(m.first - (0.5 * m.scale - 0.5)) < 1e-6;
    return m;
}

Result<Volume> splineResample(const Volume& volume, const Geometry& target,
                              const std::array<AxisInterpolation, 3>& per_axis, int threads,
                              SplineBoundary boundary) {
    if (volume.empty() || volume.pixelType() != PixelType::kFloat32)
        return invalidArgument("spline resampling needs a float32 volume", volume.info().source);
    const Geometry source = volume.geometry();
    for (int e = 0; e < 9; ++e)
        if (std::abs(source.direction[e] - target.direction[e]) > 1e-5)
            return invalidArgument("resample: target grid has another direction than the volume",
                                   volume.info().source);
    for (int a = 0; a < 3; ++a)
        if (target.size[a] < 1) return invalidArgument("resample: empty target grid");

    std::array<AxisPlan, 3> plans;
    for (int a = 0; a < 3; ++a) {
        plans[a] = planAxis(source.size[a], target.size[a], axisSampling(source, target, a),
                            per_axis[a], boundary);
    }
    // Most shrinking axis first: later passes run on less data.
    std::array<int, 3> order{0, 1, 2};
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
        return static_cast<double>(target.size[x]) / static_cast<double>(source.size[x]) <
               static_cast<double>(target.size[y]) / static_cast<double>(source.size[y]);
    });

    Volume result = Volume::allocate<float>(target, volume.info());
    Shape shape{source.size};
    std::vector<float> current, next;
    const float* in = volume.data<float>();
    int remaining = 0;
    for (int a : order) remaining += plans[a].skip ? 0 : 1;
    if (remaining == 0) {
        std::copy(in, in + shape.count(), result.data<float>());
        return result;
    }
    for (int a : order) {
        if (plans[a].skip) continue;
        Shape out_shape = shape;
        out_shape.size[a] = target.size[a];
        float* out;
        if (--remaining == 0) {
            out = result.data<float>();
        } else {
            next.assign(static_cast<size_t>(out_shape.count()), 0.f);
            out = next.data();
        }
        resampleAxis(in, shape, a, plans[a], out, threads);
        if (remaining > 0) {
            current.swap(next);
            in = current.data();
        }
        shape = out_shape;
    }
    return result;
}

}  // namespace voxseg::pipeline
