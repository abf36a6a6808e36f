#include "pipeline/prediction_export.h"

#include "engine/inference/half_kernels.h"
#include "engine/inference/sliding_window_nnunet.h"
#include "pipeline/crop.h"
#include "pipeline/orientation.h"
#include "pipeline/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <type_traits>

namespace voxseg::pipeline {

namespace {

// Source taps of one output index along one axis.
struct Tap {
    int64_t i0 = 0;
    int64_t i1 = 0;
    float w = 0.f;    // weight of i1
    double w64 = 0.;  // the same in float64 (ExportSpec::round_to_half)
};

std::vector<Tap> axisTaps(int64_t out_size, int64_t in_size, bool nearest) {
    std::vector<Tap> taps(static_cast<size_t>(out_size));
    const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
    for (int64_t o = 0; o < out_size; ++o) {
        Tap& t = taps[static_cast<size_t>(o)];
        if (in_size == out_size) {
            t.i0 = t.i1 = o;
            continue;
        }
        const double p = std::clamp((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0,
                                    static_cast<double>(in_size - 1));
        if (nearest) {
            // scipy's order 0: floor(p + 0.5), ties up.
            t.i0 = t.i1 =
                std::clamp<int64_t>(static_cast<int64_t>(std::floor(p + 0.5)), 0, in_size - 1);
            continue;
        }
        t.i0 = static_cast<int64_t>(std::floor(p));
        t.i1 = std::min(t.i0 + 1, in_size - 1);
        t.w64 = p - static_cast<double>(t.i0);
        t.w = static_cast<float>(t.w64);
    }
    return taps;
}

Status checkScores(const engine::Tensor& scores, const PreprocessRecord& record) {
    const auto dims = tensorDims(record.network, record.axis_order);
    if (scores.dtype() != engine::DType::kFloat32 && scores.dtype() != engine::DType::kFloat16)
        return invalidArgument(std::string("network scores must be float32 or float16, got ") +
                               engine::dtypeName(scores.dtype()));
    if (scores.rank() != 4 || scores.dim(1) != dims[0] || scores.dim(2) != dims[1] ||
        scores.dim(3) != dims[2] || scores.dim(0) < 1)
        return invalidArgument("network output " + engine::shapeToString(scores.shape()) +
                               " does not match the network grid [K, " + std::to_string(dims[0]) +
                               ", " + std::to_string(dims[1]) + ", " + std::to_string(dims[2]) +
                               "]");
    return Status::ok();
}

// best/arg <- r/c where r > best (first maximum wins), branch-free so that it vectorises.
void argmaxStep(const float* __restrict r, int32_t c, float* __restrict best,
                int32_t* __restrict arg, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const bool more = r[i] > best[i];
        best[i] = more ? r[i] : best[i];
        arg[i] = more ? c : arg[i];
    }
}

// The network's scores as the export reads them: for every axis of record.cropped the taps into
// record.network (nearest on nnU-Net's separate axis), the tensor strides of the network grid's
// index axes, and reads of float32 or float16 (T = uint16_t, through half::toFloatTable()) values.
template <typename T>
struct ScoreGrid {
    ScoreGrid(const engine::Tensor& scores, const PreprocessRecord& record)
        : channels(scores.dim(0)),
          voxels(record.network.voxelCount()),
          base(scores.data<T>()),
          table(engine::half::toFloatTable()) {
        const Geometry& in = record.network;
        const Geometry& out = record.cropped;
        separate = separateAxis(in.spacing, out.spacing);
        for (int a = 0; a < 3; ++a) taps[a] = axisTaps(out.size[a], in.size[a], a == separate);
        if (record.axis_order == AxisOrder::kZyx)
            stride = {1, in.size[0], in.size[0] * in.size[1]};
        else
            stride = {in.size[1] * in.size[2], in.size[2], 1};
    }
    float get(const T* p, int64_t offset) const {
        if constexpr (std::is_same_v<T, float>)
            return p[offset];
        else
            return table[p[offset]];
    }
    // First value of channel c.
    const T* channel(int64_t c) const { return base + c * voxels; }

    std::array<std::vector<Tap>, 3> taps;
    std::array<int64_t, 3> stride{};
    int separate = -1;  // nnU-Net's separate (order 0) axis, -1: none
    int64_t channels;
    int64_t voxels;  // per channel
    const T* base;
    const float* table;
};

// fn(begin, end) on `threads` threads (0: every core) splitting [0, count).
template <typename Fn>
void parallelRanges(int64_t count, int threads, const Fn& fn) {
    int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    n = std::clamp<int>(n, 1, static_cast<int>(std::max<int64_t>(1, count)));
    if (n == 1) {
        fn(int64_t{0}, count);
        return;
    }
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) pool.emplace_back(fn, count * t / n, count * (t + 1) / n);
    for (auto& th : pool) th.join();
}

// Calls visit_row(j, k, rows) for every row (fixed j, k) of record.cropped; rows[c * ni + i] is
// channel c at voxel i (ni = record.cropped.size[0]). T: float (float32 scores) or uint16_t
// (float16 scores, read through half::toFloatTable()).
// Linear interpolation is done i first, then j, then k. The i-interpolated source rows are kept
// in a small cache, so each is computed once per output slice instead of once per output voxel
// (upsampling reuses a source row for several output rows).
template <typename T, typename VisitRow>
void interpolateScores(const engine::Tensor& scores, const PreprocessRecord& record, int threads,
                       const VisitRow& visit_row) {
    const Geometry& in = record.network;
    const Geometry& out = record.cropped;
    const ScoreGrid<T> grid(scores, record);
    const auto& taps = grid.taps;
    const auto& stride = grid.stride;
    const int64_t channels = grid.channels;
    const int64_t ni = out.size[0];

    auto worker = [&](int64_t k_begin, int64_t k_end) {
        // Four cached source rows (all channels, interpolated along i), keyed by source (j, k).
        constexpr int kSlots = 4;
        std::array<std::pair<int64_t, int64_t>, kSlots> key;
        key.fill({-1, -1});
        std::vector<float> cache(static_cast<size_t>(kSlots * channels * ni));
        std::vector<float> rows(static_cast<size_t>(channels * ni));
        std::vector<float> src_row(static_cast<size_t>(in.size[0]));
        const std::vector<Tap>& ti = taps[0];
        auto sourceRow = [&](int64_t js, int64_t ks, const std::array<bool, kSlots>& keep) {
            for (int s = 0; s < kSlots; ++s)
                if (key[s] == std::pair{js, ks}) return s;
            int s = 0;
            while (keep[s]) ++s;
            key[s] = {js, ks};
            for (int64_t c = 0; c < channels; ++c) {
                const T* p = grid.channel(c) + js * stride[1] + ks * stride[2];
                float* dst = &cache[static_cast<size_t>((s * channels + c) * ni)];
                if constexpr (std::is_same_v<T, uint16_t>) {
                    if (stride[0] == 1) {  // one vectorised fp16 -> float pass, then floats
                        engine::half::toFloatRow(p, src_row.data(), in.size[0]);
                        const float* q = src_row.data();
                        for (int64_t i = 0; i < ni; ++i) {
                            const float p0 = q[ti[i].i0];
                            dst[i] = p0 + ti[i].w * (q[ti[i].i1] - p0);
                        }
                        continue;
                    }
                }
                for (int64_t i = 0; i < ni; ++i) {
                    const float p0 = grid.get(p, ti[i].i0 * stride[0]);
                    dst[i] = p0 + ti[i].w * (grid.get(p, ti[i].i1 * stride[0]) - p0);
                }
            }
            return s;
        };
        for (int64_t k = k_begin; k < k_end; ++k) {
            const Tap& tk = taps[2][static_cast<size_t>(k)];
            for (int64_t j = 0; j < out.size[1]; ++j) {
                const Tap& tj = taps[1][static_cast<size_t>(j)];
                const std::pair<int64_t, int64_t> need[4] = {
                    {tj.i0, tk.i0}, {tj.i1, tk.i0}, {tj.i0, tk.i1}, {tj.i1, tk.i1}};
                std::array<bool, kSlots> keep{};
                for (int s = 0; s < kSlots; ++s)
                    for (const auto& n : need) keep[s] = keep[s] || key[s] == n;
                int slot[4];
                for (int n = 0; n < 4; ++n) {
                    slot[n] = sourceRow(need[n].first, need[n].second, keep);
                    keep[slot[n]] = true;
                }
                const float wj = tj.w, wk = tk.w;
                for (int64_t c = 0; c < channels; ++c) {
                    auto row = [&](int n) {
                        return &cache[static_cast<size_t>((slot[n] * channels + c) * ni)];
                    };
                    const float *r00 = row(0), *r10 = row(1), *r01 = row(2), *r11 = row(3);
                    float* v = &rows[static_cast<size_t>(c * ni)];
                    for (int64_t i = 0; i < ni; ++i) {
                        const float c0 = r00[i] + wj * (r10[i] - r00[i]);
                        const float c1 = r01[i] + wj * (r11[i] - r01[i]);
                        v[i] = c0 + wk * (c1 - c0);
                    }
                }
                visit_row(j, k, rows.data());
            }
        }
    };
    parallelRanges(out.size[2], threads, worker);
}

// Softmax label maps that interpolate only where it can change the answer. If one channel is
// the (first) maximum at all 8 network voxels around an output voxel, it is also the maximum of
// any convex combination of them, so of their trilinear interpolation: that voxel takes its
// label directly (exact arithmetic; float rounding could only matter at ties below it). The
// others, along label borders, get the channels interpolated in the same order as
// interpolateScores, then the argmax. TS: float or uint16_t (fp16) scores; TL: label type.
template <typename TS, typename TL>
void softmaxLabels(const engine::Tensor& scores, const PreprocessRecord& record, int threads,
                   const std::vector<int>& labels, TL* dst) {
    const Geometry& out = record.cropped;
    const ScoreGrid<TS> grid(scores, record);
    const auto& taps = grid.taps;
    const auto& stride = grid.stride;
    const int64_t channels = grid.channels, voxels = grid.voxels;

    // Winning channel of every network voxel (first maximum), in the tensor's spatial order.
    std::vector<uint8_t> winner(static_cast<size_t>(voxels));
    parallelRanges(voxels, threads, [&](int64_t begin, int64_t end) {
        for (int64_t v = begin; v < end; ++v) {
            float best = grid.get(grid.channel(0), v);
            uint8_t arg = 0;
            for (int64_t c = 1; c < channels; ++c) {
                const float x = grid.get(grid.channel(c), v);
                if (x > best) best = x, arg = static_cast<uint8_t>(c);
            }
            winner[static_cast<size_t>(v)] = arg;
        }
    });

    const int64_t ni = out.size[0], nj = out.size[1];
    parallelRanges(out.size[2], threads, [&](int64_t k_begin, int64_t k_end) {
        for (int64_t k = k_begin; k < k_end; ++k) {
            const Tap& tk = taps[2][static_cast<size_t>(k)];
            for (int64_t j = 0; j < nj; ++j) {
                const Tap& tj = taps[1][static_cast<size_t>(j)];
                TL* row = dst + (k * nj + j) * ni;
                for (int64_t i = 0; i < ni; ++i) {
                    const Tap& ti = taps[0][static_cast<size_t>(i)];
                    const int64_t o = ti.i0 * stride[0] + tj.i0 * stride[1] + tk.i0 * stride[2];
                    const int64_t di = (ti.i1 - ti.i0) * stride[0];
                    const int64_t dj = (tj.i1 - tj.i0) * stride[1];
                    const int64_t dk = (tk.i1 - tk.i0) * stride[2];
                    const uint8_t* w = winner.data() + o;
                    const uint8_t a = w[0];
                    if (w[di] == a && w[dj] == a && w[di + dj] == a && w[dk] == a &&
                        w[dk + di] == a && w[dk + dj] == a && w[dk + dj + di] == a) {
                        row[i] = static_cast<TL>(labels[a]);
                        continue;
                    }
                    float best = 0.f;
                    int64_t arg = 0;
                    for (int64_t c = 0; c < channels; ++c) {
                        const TS* p = grid.channel(c) + o;
                        auto get = [&](int64_t offset) { return grid.get(p, offset); };
                        const float p0 = get(0), pj = get(dj), pk = get(dk), pjk = get(dk + dj);
                        const float c00 = p0 + ti.w * (get(di) - p0);
                        const float c10 = pj + ti.w * (get(dj + di) - pj);
                        const float c01 = pk + ti.w * (get(dk + di) - pk);
                        const float c11 = pjk + ti.w * (get(dk + dj + di) - pjk);
                        const float c0 = c00 + tj.w * (c10 - c00);
                        const float c1 = c01 + tj.w * (c11 - c01);
                        const float v = c0 + tk.w * (c1 - c0);
                        if (c == 0 || v > best) best = v, arg = c;
                    }
                    row[i] = static_cast<TL>(labels[static_cast<size_t>(arg)]);
                }
            }
        }
    });
}

// ExportSpec::round_to_half: nnU-Net's export of float16 logits. Every voxel's channels are
// interpolated in float64 as scipy.ndimage.zoom (order 1, grid_mode, mode nearest: what
// scikit-image's resize calls) computes them, term by term: the sum over the 2^n corners in C
// order of the array axes of value * weight(axis 0) * weight(axis 1)..., weights 1 - f and
// 1 - (1 - f); the separate axis (order 0) picks its nearest slice. Each value is rounded once to
// float16, as numpy stores it into nnU-Net's float16 array; the label is the first maximum of
// those (softmax in float32 keeps their order and ties; torch's argmax takes the first).
template <typename TS, typename TL>
void halfRoundedLabels(const engine::Tensor& scores, const PreprocessRecord& record, int threads,
                       const std::vector<int>& labels, TL* dst) {
    const Geometry& out = record.cropped;
    const ScoreGrid<TS> grid(scores, record);
    const auto& taps = grid.taps;
    const auto& stride = grid.stride;
    const int64_t channels = grid.channels;
    const float* half_value = engine::half::toFloatTable();
    const int64_t ni = out.size[0], nj = out.size[1];
    // The interpolated axes (voxseg's i, j, k) in the tensor's C order (slowest first).
    std::vector<int> axes;
    const std::array<int, 3> c_order = record.axis_order == AxisOrder::kZyx
                                           ? std::array<int, 3>{2, 1, 0}
                                           : std::array<int, 3>{0, 1, 2};
    for (int a : c_order)
        if (a != grid.separate) axes.push_back(a);
    const int corners = 1 << axes.size();
    parallelRanges(out.size[2], threads, [&](int64_t k_begin, int64_t k_end) {
        std::array<int64_t, 8> offset{};
        for (int64_t k = k_begin; k < k_end; ++k) {
            for (int64_t j = 0; j < nj; ++j) {
                TL* row = dst + (k * nj + j) * ni;
                for (int64_t i = 0; i < ni; ++i) {
                    const std::array<const Tap*, 3> t = {&taps[0][static_cast<size_t>(i)],
                                                         &taps[1][static_cast<size_t>(j)],
                                                         &taps[2][static_cast<size_t>(k)]};
                    int64_t base = 0;
                    for (int a = 0; a < 3; ++a) base += t[a]->i0 * stride[a];
                    for (int c = 0; c < corners; ++c) {  // last axis fastest
                        offset[c] = base;
                        for (size_t n = 0; n < axes.size(); ++n)
                            if ((c >> (axes.size() - 1 - n)) & 1)
                                offset[c] += (t[axes[n]]->i1 - t[axes[n]]->i0) * stride[axes[n]];
                    }
                    float best = 0.f;
                    int64_t arg = 0;
                    for (int64_t ch = 0; ch < channels; ++ch) {
                        const TS* p = grid.channel(ch);
                        double sum = 0.0;
                        for (int c = 0; c < corners; ++c) {
                            double term = grid.get(p, offset[c]);
                            for (size_t n = 0; n < axes.size(); ++n) {
                                const Tap& tap = *t[axes[n]];
                                const double w0 = 1.0 - tap.w64;
                                term *= ((c >> (axes.size() - 1 - n)) & 1) ? 1.0 - w0 : w0;
                            }
                            sum += term;
                        }
                        const float h = half_value[engine::nnunet_fp16::doubleToHalf(sum)];
                        if (ch == 0 || h > best) best = h, arg = ch;
                    }
                    row[i] = static_cast<TL>(labels[static_cast<size_t>(arg)]);
                }
            }
        }
    });
}

// Cropped, oriented volume -> original grid. Takes the volume by value and drops each copy as soon
// as the next exists, so at most two label maps are alive (one when nothing was cropped and the
// orientation is the input's).
Result<Volume> backToOriginal(Volume cropped, const PreprocessRecord& record,
                              double outside_value) {
    Volume oriented;
    if (record.crop.covers(record.oriented)) {
        oriented = std::move(cropped);
    } else {
        VOXSEG_ASSIGN_OR_RETURN(oriented,
                                paste(cropped, record.oriented, record.crop, outside_value));
        cropped = Volume();
    }
    if (record.orientation.isIdentity()) {
        Volume::applyGeometry(record.original, *oriented.base());
        return oriented;
    }
    Volume out = applyAxisMapping(oriented, record.orientation.inverse());
    // The inverse mapping is exact; set the input geometry bit for bit.
    Volume::applyGeometry(record.original, *out.base());
    return out;
}

}  // namespace

Result<Volume> scoresToLabelMap(const engine::Tensor& scores, const PreprocessRecord& record,
                                const ExportSpec& spec, const Progress& progress) {
    VOXSEG_RETURN_IF_ERROR(checkScores(scores, record));
    const int64_t channels = scores.dim(0);
    std::vector<int> labels = spec.channel_labels;
    if (labels.empty()) {
        for (int64_t c = 0; c < channels; ++c)
            labels.push_back(
                static_cast<int>(spec.activation == OutputActivation::kSoftmax ? c : c + 1));
    }
    if (static_cast<int64_t>(labels.size()) != channels)
        return invalidArgument("the network gives " + std::to_string(channels) +
                               " output channels but the model lists " +
                               std::to_string(labels.size()) + " labels for them");
    const int max_label = *std::max_element(labels.begin(), labels.end());
    if (*std::min_element(labels.begin(), labels.end()) < 0 || max_label > 65535)
        return invalidArgument("label values must be in 0..65535");

    auto run = [&](auto tag) -> Result<Volume> {
        using T = decltype(tag);
        Volume cropped = Volume::allocate<T>(record.cropped);
        T* dst = cropped.data<T>();
        const int64_t ni = record.cropped.size[0], nj = record.cropped.size[1];
        const bool softmax = spec.activation == OutputActivation::kSoftmax;
        const float threshold = static_cast<float>(spec.threshold);
        // Argmax over channels, row by row (first maximum wins, as a per-voxel loop would).
        auto visit = [&](int64_t j, int64_t k, const float* rows) {
            thread_local std::vector<float> best;
            thread_local std::vector<int32_t> arg;
            best.assign(rows, rows + ni);
            arg.assign(static_cast<size_t>(ni), 0);
            for (int64_t c = 1; c < channels; ++c) {
                argmaxStep(rows + c * ni, static_cast<int32_t>(c), best.data(), arg.data(), ni);
            }
            T* out = dst + (k * nj + j) * ni;
            for (int64_t i = 0; i < ni; ++i) {
                T label = static_cast<T>(labels[static_cast<size_t>(arg[i])]);
                if (!softmax && best[i] < threshold) label = 0;
                out[i] = label;
            }
        };
        const bool f16 = scores.dtype() == engine::DType::kFloat16;
        if (softmax && spec.round_to_half) {
            if (f16)
                halfRoundedLabels<uint16_t, T>(scores, record, spec.threads, labels, dst);
            else
                halfRoundedLabels<float, T>(scores, record, spec.threads, labels, dst);
        } else if (softmax && channels <= 256 && !spec.interpolate_everywhere) {
            if (f16)
                softmaxLabels<uint16_t, T>(scores, record, spec.threads, labels, dst);
            else
                softmaxLabels<float, T>(scores, record, spec.threads, labels, dst);
        } else if (f16) {
            interpolateScores<uint16_t>(scores, record, spec.threads, visit);
        } else {
            interpolateScores<float>(scores, record, spec.threads, visit);
        }
        progress.report(0.9, "label map");
        return backToOriginal(std::move(cropped), record, 0.0);
    };
    Result<Volume> out = max_label <= 255 ? run(uint8_t{}) : run(uint16_t{});
    progress.report(1.0, "label map");
    return out;
}

Result<Volume> scoreChannelToOriginal(const engine::Tensor& scores, int64_t channel,
                                      const PreprocessRecord& record, double outside_value) {
    VOXSEG_RETURN_IF_ERROR(checkScores(scores, record));
    if (channel < 0 || channel >= scores.dim(0))
        return invalidArgument("score channel " + std::to_string(channel) + " out of range");
    // Interpolate a one-channel view of the tensor.
    const int64_t n = record.network.voxelCount();
    engine::Tensor one(engine::DType::kFloat32, {1, scores.dim(1), scores.dim(2), scores.dim(3)});
    if (scores.dtype() == engine::DType::kFloat16)
        engine::half::toFloatRow(scores.data<uint16_t>() + channel * n, one.data<float>(), n);
    else
        std::memcpy(one.data<float>(), scores.data<float>() + channel * n, sizeof(float) * n);
    Volume cropped = Volume::allocate<float>(record.cropped);
    float* dst = cropped.data<float>();
    const int64_t ni = record.cropped.size[0], nj = record.cropped.size[1];
    interpolateScores<float>(one, record, 0, [&](int64_t j, int64_t k, const float* row) {
        std::copy(row, row + ni, dst + (k * nj + j) * ni);
    });
    return backToOriginal(std::move(cropped), record, outside_value);
}

}  // namespace voxseg::pipeline
