#include "engine/inference/sliding_window.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/memory_limit.h"
#include "engine/inference/half_kernels.h"
#include "engine/inference/nnunet_label_sums.h"
#include "engine/inference/sliding_window_nnunet.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <type_traits>

namespace voxseg::engine {
namespace {

using Clock = std::chrono::steady_clock;

// 1D Gaussian weights of one patch axis, max 1 (before any clamping).
std::vector<double> gaussian1d(int64_t patch, double sigma_scale, WindowConvention convention) {
    std::vector<double> g(static_cast<size_t>(patch));
    const double sigma = static_cast<double>(patch) * sigma_scale;
    if (convention == WindowConvention::kNnUNet) {
        // scipy.ndimage.gaussian_filter of a delta at patch // 2, truncate = 4.0: the kernel is
        // zero beyond radius = int(4 * sigma + 0.5). Normalising by the maximum cancels
        // scipy's normalisation by the kernel sum.
        const int64_t center = patch / 2;
        const int64_t radius = static_cast<int64_t>(4.0 * sigma + 0.5);
        for (int64_t i = 0; i < patch; ++i) {
            const double x = static_cast<double>(i - center);
            g[static_cast<size_t>(i)] =
                std::abs(i - center) <= radius ? std::exp(-0.5 * x * x / (sigma * sigma)) : 0.0;
        }
    } else {
        // MONAI compute_importance_map: arange(-(p - 1) / 2, (p - 1) / 2 + 1), exp(-x^2 / 2s^2).
        const double half = (static_cast<double>(patch) - 1.0) / 2.0;
        for (int64_t i = 0; i < patch; ++i) {
            const double x = static_cast<double>(i) - half;
            g[static_cast<size_t>(i)] = std::exp(x * x / (-2.0 * sigma * sigma));
        }
    }
    return g;
}

// Copies one patch (all channels) out of `src` (C x D x H x W) at `origin`, flipping the axes
// whose bit is set in `flips` (bit 0 = D, 1 = H, 2 = W), into `dst` (C x pd x ph x pw).
void gatherPatch(const float* src, const std::array<int64_t, 3>& dims, int64_t channels,
                 const std::array<int64_t, 3>& origin, const std::array<int64_t, 3>& patch,
                 unsigned flips, float* dst) {
    const int64_t plane = dims[1] * dims[2];
    const int64_t volume = dims[0] * plane;
    const int64_t pw = patch[2];
    for (int64_t c = 0; c < channels; ++c) {
        const float* src_c = src + c * volume;
        for (int64_t z = 0; z < patch[0]; ++z) {
            const int64_t sz = origin[0] + ((flips & 1u) ? patch[0] - 1 - z : z);
            for (int64_t y = 0; y < patch[1]; ++y) {
                const int64_t sy = origin[1] + ((flips & 2u) ? patch[1] - 1 - y : y);
                const float* s = src_c + sz * plane + sy * dims[2] + origin[2];
                float* d = dst + ((c * patch[0] + z) * patch[1] + y) * pw;
                if (flips & 4u) {
                    for (int64_t x = 0; x < pw; ++x) d[x] = s[pw - 1 - x];
                } else {
                    std::memcpy(d, s, static_cast<size_t>(pw) * sizeof(float));
                }
            }
        }
    }
}

// acc (K x D x H x W) at `origin` += weight * inverse_weight_sum * unflip(pred) for one patch
// output (K x patch): every contribution is divided by the voxel's total weight as it is added,
// so the sums are the final weighted means (no pass over the volume afterwards) and keep the
// magnitude of the network's outputs. That matters in fp16: near the volume's corners the raw
// Gaussian products (~1e-10) are below fp16's smallest value and would round to zero.
// `row` is scratch for one patch row (pw floats).
template <typename Acc>
void scatterPatch(const float* pred, const float* weight, const float* inverse_weight_sum,
                  const std::array<int64_t, 3>& patch, int64_t classes, unsigned flips,
                  const std::array<int64_t, 3>& origin, const std::array<int64_t, 3>& dims,
                  float* row, Acc* acc) {
    const int64_t plane = dims[1] * dims[2];
    const int64_t volume = dims[0] * plane;
    const int64_t pw = patch[2];
    const int64_t patch_voxels = patch[0] * patch[1] * pw;
    const bool reversed = (flips & 4u) != 0;
    for (int64_t z = 0; z < patch[0]; ++z) {
        const int64_t sz = (flips & 1u) ? patch[0] - 1 - z : z;
        for (int64_t y = 0; y < patch[1]; ++y) {
            const int64_t sy = (flips & 2u) ? patch[1] - 1 - y : y;
            const int64_t offset = (origin[0] + z) * plane + (origin[1] + y) * dims[2] + origin[2];
            const float* __restrict w = weight + (z * patch[1] + y) * pw;
            const float* __restrict iw = inverse_weight_sum + offset;
            for (int64_t x = 0; x < pw; ++x) row[x] = w[x] * iw[x];
            for (int64_t k = 0; k < classes; ++k) {
                const float* __restrict s = pred + k * patch_voxels + (sz * patch[1] + sy) * pw;
                Acc* __restrict d = acc + k * volume + offset;
                if constexpr (std::is_same_v<Acc, uint16_t>) {
                    half::accumulateRow(d, row, s, pw, reversed);
                } else if (reversed) {
                    for (int64_t x = 0; x < pw; ++x) d[x] += row[x] * s[pw - 1 - x];
                } else {
                    for (int64_t x = 0; x < pw; ++x) d[x] += row[x] * s[x];
                }
            }
        }
    }
}

// Copies `src` (C x sd x sh x sw) into `dst` (C x dd x dh x dw) at `offset` (dst larger), or the
// reverse crop when `crop` is set.
template <typename T>
void copyBox(const T* src, const std::array<int64_t, 3>& src_dims, T* dst,
             const std::array<int64_t, 3>& dst_dims, int64_t channels,
             const std::array<int64_t, 3>& offset, bool crop) {
    const std::array<int64_t, 3>& small = crop ? dst_dims : src_dims;
    const std::array<int64_t, 3>& big = crop ? src_dims : dst_dims;
    const int64_t big_volume = big[0] * big[1] * big[2];
    const int64_t small_volume = small[0] * small[1] * small[2];
    for (int64_t c = 0; c < channels; ++c) {
        for (int64_t z = 0; z < small[0]; ++z) {
            for (int64_t y = 0; y < small[1]; ++y) {
                const int64_t big_index = c * big_volume +
                                          ((z + offset[0]) * big[1] + (y + offset[1])) * big[2] +
                                          offset[2];
                const int64_t small_index = c * small_volume + (z * small[1] + y) * small[2];
                if (crop) {
                    std::memcpy(dst + small_index, src + big_index,
                                static_cast<size_t>(small[2]) * sizeof(T));
                } else {
                    std::memcpy(dst + big_index, src + small_index,
                                static_cast<size_t>(small[2]) * sizeof(T));
                }
            }
        }
    }
}

template <typename T>
Status argmaxImpl(const Tensor& scores, std::span<T> out, std::span<const int> values,
                  bool use_threshold, float threshold) {
    const bool half = scores.dtype() == DType::kFloat16;
    if ((scores.dtype() != DType::kFloat32 && !half) || scores.rank() < 2)
        return invalidArgument("label maps need float32 or float16 scores [K, spatial...], got " +
                               std::string(dtypeName(scores.dtype())) + " " +
                               shapeToString(scores.shape()));
    const int64_t classes = scores.dim(0);
    const int64_t voxels = scores.numel() / std::max<int64_t>(classes, 1);
    if (static_cast<int64_t>(out.size()) != voxels)
        return invalidArgument("label buffer has " + std::to_string(out.size()) +
                               " voxels, scores have " + std::to_string(voxels));
    if (!values.empty() && static_cast<int64_t>(values.size()) != classes)
        return invalidArgument("label value table has " + std::to_string(values.size()) +
                               " entries for " + std::to_string(classes) + " channels");
    const int64_t max_label =
        values.empty() ? classes : *std::max_element(values.begin(), values.end());
    if (max_label > std::numeric_limits<T>::max())
        return invalidArgument("label value " + std::to_string(max_label) +
                               " does not fit the label type (max " +
                               std::to_string(std::numeric_limits<T>::max()) + ")");
    // Blocks of voxels, channel-outer within a block: every pass contiguous (vectorisable),
    // `best` the running max. Float16 scores are widened a block at a time (exactly: every
    // float16 is a float32), so no float32 copy of all K channels is made.
    constexpr int64_t kBlock = 16384;
    std::vector<float> best(static_cast<size_t>(std::min(voxels, kBlock)));
    std::vector<float> widened(half ? best.size() : 0);
    std::vector<int32_t> index(best.size());
    auto channel = [&](int64_t k, int64_t v0, int64_t n) -> const float* {
        if (!half) return scores.data<float>() + k * voxels + v0;
        half::toFloatRow(scores.data<uint16_t>() + k * voxels + v0, widened.data(), n);
        return widened.data();
    };
    for (int64_t v0 = 0; v0 < voxels; v0 += kBlock) {
        const int64_t n = std::min(kBlock, voxels - v0);
        const float* s0 = channel(0, v0, n);
        std::copy(s0, s0 + n, best.begin());
        std::fill(index.begin(), index.begin() + n, 0);
        for (int64_t k = 1; k < classes; ++k) {
            const float* sk = channel(k, v0, n);
            for (int64_t v = 0; v < n; ++v) {
                const bool greater = sk[v] > best[v];
                best[v] = greater ? sk[v] : best[v];
                index[v] = greater ? static_cast<int32_t>(k) : index[v];
            }
        }
        for (int64_t v = 0; v < n; ++v) {
            const int32_t k = index[v];
            int label = values.empty() ? k : values[k];
            if (use_threshold) {
                label = best[v] > threshold ? (values.empty() ? k + 1 : values[k]) : 0;
            }
            out[v0 + v] = static_cast<T>(label);
        }
    }
    return Status::ok();
}

// Hands one network output (K x patch, float32) of batch item `item` on.
using OutputSink = std::function<void(int64_t item, const float* output)>;
// Runs every batch through networks [first_net, last_net), each output to the sink; pass of
// passes places the batches in the progress.
using BatchRunner = std::function<Status(size_t first_net, size_t last_net, int64_t pass,
                                         int64_t passes, const OutputSink& sink)>;

// What Accumulation::kNnUNetFp16 needs of the grid (SlidingWindow::run's padded volume).
struct NnUNetGrid {
    const WindowGrid& grid;
    const std::vector<unsigned>& flip_sets;  // identity first, then nnU-Net's combinations
    int64_t classes;
    size_t networks;
    const std::vector<uint16_t>& map;  // float16 importance map
};

// One window's prediction from the network output `out` of flip set `f` (of flip_sets): `out`
// itself without mirroring; with it, torch.flip(network(torch.flip(x, axes)), axes) of every
// flip set summed into `mean` (K x patch) in nnU-Net's order and divided by their number,
// returned after the last flip set (nullptr before it).
const float* windowPrediction(const float* out, int64_t f, const std::vector<unsigned>& flip_sets,
                              const std::array<int64_t, 3>& patch, int64_t classes,
                              std::vector<float>& mean) {
    const auto num_flips = static_cast<int64_t>(flip_sets.size());
    if (num_flips == 1) return out;  // the identity alone (flip set 0 is none)
    const unsigned flips = flip_sets[static_cast<size_t>(f)];
    const int64_t pw = patch[2];
    const int64_t patch_voxels = patch[0] * patch[1] * pw;
    for (int64_t k = 0; k < classes; ++k)
        for (int64_t z = 0; z < patch[0]; ++z) {
            const int64_t sz = (flips & 1u) ? patch[0] - 1 - z : z;
            for (int64_t y = 0; y < patch[1]; ++y) {
                const int64_t sy = (flips & 2u) ? patch[1] - 1 - y : y;
                const float* s = out + k * patch_voxels + (sz * patch[1] + sy) * pw;
                float* d = mean.data() + k * patch_voxels + (z * patch[1] + y) * pw;
                for (int64_t x = 0; x < pw; ++x) {
                    const float value = s[(flips & 4u) ? pw - 1 - x : x];
                    d[x] = f == 0 ? value : d[x] + value;
                }
            }
        }
    if (f != num_flips - 1) return nullptr;
    for (float& v : mean) v /= static_cast<float>(num_flips);
    return mean.data();
}

// nnU-Net 2.x's _internal_predict_sliding_window_return_logits per network, then
// predict_logits_from_preprocessed_data's average over networks, in nnunet_fp16's arithmetic.
// Returns float16 [K, dims].
Result<Tensor> nnunetAccumulate(const NnUNetGrid& g, const BatchRunner& run_batches) {
    // Plain references, not a structured binding: clang 14 (the sanitizer and fuzz builds) does
    // not let the lambdas below capture structured bindings.
    const auto& dims = g.grid.padded;
    const auto& patch = g.grid.patch;
    const auto& flip_sets = g.flip_sets;
    const int64_t classes = g.classes;
    const size_t networks = g.networks;
    const auto& map = g.map;
    const int64_t plane = dims[1] * dims[2];
    const int64_t voxels = dims[0] * plane;
    const int64_t pw = patch[2];
    const int64_t patch_voxels = patch[0] * patch[1] * pw;
    const int64_t num_flips = static_cast<int64_t>(flip_sets.size());
    auto windowOrigin = [&](int64_t window) { return gridOrigin(g.grid, window); };
    // Calls fn(volume offset, patch offset) for every patch row of a window.
    auto forEachRow = [&](const std::array<int64_t, 3>& o, const auto& fn) {
        for (int64_t z = 0; z < patch[0]; ++z)
            for (int64_t y = 0; y < patch[1]; ++y)
                fn((o[0] + z) * plane + (o[1] + y) * dims[2] + o[2], (z * patch[1] + y) * pw);
    };
    const int64_t num_windows = g.grid.num_windows;
    std::vector<uint16_t> weight_sum;  // n_predictions
    Tensor acc, total;
    // One window's prediction, mirrored copies averaged; without mirroring the network's output
    // is that prediction and is summed from where it is (K x patch floats saved: 0.76 GB for
    // TotalSegmentator's 118 classes on a 112 x 112 x 128 patch).
    std::vector<float> mean;
    try {
        weight_sum.assign(static_cast<size_t>(voxels), 0);
        acc = Tensor(DType::kFloat16, {classes, dims[0], dims[1], dims[2]});
        if (networks > 1) total = Tensor(DType::kFloat16, acc.shape());
        if (num_flips > 1) mean.resize(static_cast<size_t>(classes * patch_voxels));
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory,
                      "cannot allocate the float16 sliding-window sums (" +
                          std::to_string((classes * voxels * (networks > 1 ? 4 : 2)) >> 20) +
                          " MiB for " + std::to_string(classes) + " classes)");
    }
    for (int64_t w = 0; w < num_windows; ++w)
        forEachRow(windowOrigin(w), [&](int64_t v, int64_t p) {
            nnunet_fp16::addWeightsRow(weight_sum.data() + v, map.data() + p, pw);
        });
    uint16_t* a = acc.data<uint16_t>();
    const OutputSink sink = [&](int64_t item, const float* out) {
        const float* prediction =
            windowPrediction(out, item % num_flips, flip_sets, patch, classes, mean);
        if (prediction == nullptr) return;
        forEachRow(windowOrigin(item / num_flips), [&](int64_t v, int64_t p) {
            for (int64_t k = 0; k < classes; ++k)
                nnunet_fp16::addPredictionRow(a + k * voxels + v, prediction + k * patch_voxels + p,
                                              map.data() + p, pw);
        });
    };
    for (size_t m = 0; m < networks; ++m) {
        std::fill(a, a + classes * voxels, uint16_t{0});
        VOXSEG_RETURN_IF_ERROR(
            run_batches(m, m + 1, static_cast<int64_t>(m), static_cast<int64_t>(networks), sink));
        bool finite = true;
        for (int64_t k = 0; k < classes; ++k)
            finite = nnunet_fp16::divideRow(a + k * voxels, weight_sum.data(), voxels) && finite;
        if (!finite)
            return invalidArgument(
                "the float16 sliding-window sums overflowed (nnU-Net: \"Encountered inf in "
                "predicted array\"): the network's outputs exceed float16's range; use "
                "\"accumulate\": \"normalized\" in model.json");
        if (networks == 1) return acc;
        if (m == 0)
            std::memcpy(total.raw(), acc.raw(), acc.bytes());
        else
            nnunet_fp16::addRow(total.data<uint16_t>(), a, classes * voxels);
    }
    nnunet_fp16::divideRowBy(total.data<uint16_t>(), classes * voxels, static_cast<int>(networks));
    return total;
}

// nnunetAccumulate's single-network sums reduced to labels plane by plane (NnUNetLabelSums):
// argmaxLabels of its result through `values`, into `labels` (the unpadded image's voxels).
// *bytes: the most float16 sums held at once.
Status nnunetLabels(const NnUNetGrid& g, const BatchRunner& run_batches,
                    std::span<const int> values, std::span<int16_t> labels, size_t* bytes) {
    const auto& patch = g.grid.patch;
    const auto& flip_sets = g.flip_sets;
    const int64_t classes = g.classes;
    const auto num_flips = static_cast<int64_t>(flip_sets.size());
    std::vector<float> mean;
    std::optional<NnUNetLabelSums> sums;
    try {
        if (num_flips > 1)
            mean.resize(static_cast<size_t>(classes * patch[0] * patch[1] * patch[2]));
        sums.emplace(g.grid, classes, g.map, values, labels);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "cannot allocate the float16 sliding-window sums");
    }
    Status failed = Status::ok();
    const OutputSink sink = [&](int64_t item, const float* out) {
        if (!failed.isOk()) return;
        const float* prediction =
            windowPrediction(out, item % num_flips, flip_sets, patch, classes, mean);
        if (prediction != nullptr) failed = sums->add(item / num_flips, prediction);
    };
    VOXSEG_RETURN_IF_ERROR(run_batches(0, 1, 0, 1, sink));
    VOXSEG_RETURN_IF_ERROR(failed);
    VOXSEG_RETURN_IF_ERROR(sums->finish());
    *bytes = sums->peakBytes();
    return Status::ok();
}

// 1 / (the sum of the importance weights of the windows covering each voxel); 0 where none does.
void inverseWeightSums(const WindowGrid& grid, const std::vector<float>& importance,
                       std::vector<float>& inverse_weight) {
    const auto& patch = grid.patch;
    const auto& padded = grid.padded;
    for (int64_t z0 : grid.starts[0]) {
        for (int64_t y0 : grid.starts[1]) {
            for (int64_t x0 : grid.starts[2]) {
                for (int64_t z = 0; z < patch[0]; ++z) {
                    for (int64_t y = 0; y < patch[1]; ++y) {
                        const float* __restrict w =
                            importance.data() + (z * patch[1] + y) * patch[2];
                        float* __restrict d = inverse_weight.data() +
                                              ((z0 + z) * padded[1] + (y0 + y)) * padded[2] + x0;
                        for (int64_t x = 0; x < patch[2]; ++x) d[x] += w[x];
                    }
                }
            }
        }
    }
    for (float& w : inverse_weight) w = w > 0.0f ? 1.0f / w : 0.0f;
}

// The sums of k score volumes of n voxels: k in the accumulator's type + one float32 volume of
// inverse weights; nnunet-fp16: k float16 sums (twice for an ensemble) + one float16 volume of
// weights.
size_t sumsBytes(bool nnunet, int64_t networks, DType accumulator, int64_t k, int64_t n) {
    if (nnunet) return static_cast<size_t>((k * (networks > 1 ? 2 : 1) + 1) * n) * 2;
    return static_cast<size_t>(k * n) * dtypeSize(accumulator) +
           static_cast<size_t>(n) * sizeof(float);
}

// The sums and the padded copy of the image must fit the memory this process may use: Linux
// over-commits, so a larger allocation would succeed and the process be killed while the windows
// are summed (a whole-body CT with a hundred classes, a small container).
Status checkSumsFitMemory(size_t need, int64_t classes, int64_t voxels, bool fp32_sums) {
    const uint64_t limit = memoryLimitBytes();
    if (limit == 0 || need <= limit) return Status::ok();
    return Status(StatusCode::kOutOfMemory,
                  fmt::format("the sliding window needs {} MiB for {} classes on {} voxels, more "
                              "than the {}; run it where more memory is free{}",
                              need >> 20, classes, voxels, describeMemoryLimit(),
                              fp32_sums ? ", or with --accumulator fp16 (half the sums)" : ""));
}

// The scores of the image itself, cut out of the padded sums.
Tensor cropToImage(const Tensor& sums, const WindowGrid& grid, int64_t classes,
                   const std::vector<int64_t>& spatial) {
    Shape shape = {classes};
    shape.insert(shape.end(), spatial.begin(), spatial.end());
    Tensor result(sums.dtype(), shape);
    if (sums.dtype() == DType::kFloat16)
        copyBox<uint16_t>(sums.data<uint16_t>(), grid.padded, result.data<uint16_t>(), grid.dims,
                          classes, grid.pad_before, true);
    else
        copyBox<float>(sums.data<float>(), grid.padded, result.data<float>(), grid.dims, classes,
                       grid.pad_before, true);
    return result;
}

}  // namespace

std::vector<float> importanceMap(const std::vector<int64_t>& patch, double sigma_scale,
                                 WindowConvention convention) {
    const auto p = padTo3D(patch);
    std::array<std::vector<double>, 3> g;
    const size_t offset = 3 - patch.size();
    for (size_t a = 0; a < 3; ++a) {
        g[a] = a < offset ? std::vector<double>{1.0} : gaussian1d(p[a], sigma_scale, convention);
    }
    // The 3D map is the outer product of the 1D ones, whose maxima are 1, so its maximum is 1.
    std::vector<float> map(static_cast<size_t>(p[0] * p[1] * p[2]));
    size_t i = 0;
    for (int64_t z = 0; z < p[0]; ++z)
        for (int64_t y = 0; y < p[1]; ++y)
            for (int64_t x = 0; x < p[2]; ++x)
                map[i++] = static_cast<float>(g[0][z] * g[1][y] * g[2][x]);
    float min_nonzero = std::numeric_limits<float>::max();
    float min_value = std::numeric_limits<float>::max();
    for (float v : map) {
        if (v > 0.0f) min_nonzero = std::min(min_nonzero, v);
        min_value = std::min(min_value, v);
    }
    if (convention == WindowConvention::kNnUNet) {
        for (float& v : map)
            if (v == 0.0f) v = min_nonzero;
    } else {
        const float floor = std::max(min_value, 1e-3f);
        for (float& v : map) v = std::max(v, floor);
    }
    return map;
}

Result<std::unique_ptr<SlidingWindow>> SlidingWindow::create(Backend& backend, const Graph& graph,
                                                             int64_t channels,
                                                             const SlidingWindowOptions& options) {
    return create(backend, std::vector<const Graph*>{&graph}, channels, options);
}

Result<std::unique_ptr<SlidingWindow>> SlidingWindow::create(
    Backend& backend, const std::vector<const Graph*>& graphs, int64_t channels,
    const SlidingWindowOptions& options) {
    VOXSEG_RETURN_IF_ERROR(validateSlidingWindowOptions(options, {}));
    Shape input_shape = {options.batch, channels};
    input_shape.insert(input_shape.end(), options.patch_size.begin(), options.patch_size.end());
    std::vector<std::unique_ptr<CompiledGraph>> compiled;
    for (size_t m = 0; m < graphs.size(); ++m) {
        const std::string which =
            graphs.size() > 1 ? "network " + std::to_string(m + 1) + " of the ensemble" : "network";
        if (graphs[m]->inputs.size() != 1)
            return unsupported("sliding-window inference needs a network with one input, " + which +
                               " has " + std::to_string(graphs[m]->inputs.size()));
        auto c = backend.compile(*graphs[m], {input_shape}, options.compile);
        if (!c.isOk())
            return c.status().withContext("compiling the " + which + " for input " +
                                          shapeToString(input_shape) + ": ");
        compiled.push_back(std::move(c).value());
    }
    return create(std::move(compiled), options);
}

Result<std::unique_ptr<SlidingWindow>> SlidingWindow::create(
    std::unique_ptr<CompiledGraph> compiled, const SlidingWindowOptions& options) {
    std::vector<std::unique_ptr<CompiledGraph>> networks;
    networks.push_back(std::move(compiled));
    return create(std::move(networks), options);
}

Result<std::unique_ptr<SlidingWindow>> SlidingWindow::create(
    std::vector<std::unique_ptr<CompiledGraph>> networks, const SlidingWindowOptions& options) {
    VOXSEG_RETURN_IF_ERROR(validateSlidingWindowOptions(options, {}));
    if (networks.empty()) return invalidArgument("sliding-window inference needs a network");
    std::unique_ptr<SlidingWindow> sw(new SlidingWindow());
    sw->networks_ = std::move(networks);
    sw->options_ = options;
    VOXSEG_RETURN_IF_ERROR(sw->init());
    return sw;
}

Status SlidingWindow::init() {
    const auto& patch = options_.patch_size;
    const size_t rank = patch.size();
    for (size_t m = 0; m < networks_.size(); ++m) {
        const CompiledGraph& net = *networks_[m];
        const std::string which = networks_.size() > 1
                                      ? "network " + std::to_string(m + 1) + " of the ensemble"
                                      : "network";
        if (net.inputShapes().size() != 1)
            return unsupported("sliding-window inference needs a network with one input");
        const Shape& in = net.inputShapes()[0];
        Shape expected_in = {options_.batch, in.size() > 1 ? in[1] : 0};
        expected_in.insert(expected_in.end(), patch.begin(), patch.end());
        if (in != expected_in)
            return invalidArgument(which + " compiled for input " + shapeToString(in) +
                                   ", expected " + shapeToString(expected_in) +
                                   " (batch, channels, patch_size)");
        if (net.outputShapes().empty()) return invalidArgument(which + " has no outputs");
        const Shape& out = net.outputShapes()[0];
        if (out.size() != rank + 2 || out[0] != options_.batch ||
            !std::equal(patch.begin(), patch.end(), out.begin() + 2))
            return unsupported(which + " output " + shapeToString(out) +
                               " does not keep the patch's spatial shape " + shapeToString(patch) +
                               " (input " + shapeToString(in) +
                               "): sliding-window inference needs a fully convolutional "
                               "segmentation network");
        if (m == 0) {
            channels_ = in[1];
            num_classes_ = out[1];
        } else if (in[1] != channels_ || out[1] != num_classes_) {
            return invalidArgument(which + " maps " + std::to_string(in[1]) + " channels to " +
                                   std::to_string(out[1]) + ", network 1 maps " +
                                   std::to_string(channels_) + " to " +
                                   std::to_string(num_classes_) + ": ensemble members must agree");
        }
    }
    if (options_.accumulation == Accumulation::kNnUNetFp16) {
        importance_half_ =
            nnunet_fp16::importanceMap(patch, options_.sigma_scale, options_.gaussian);
        return Status::ok();
    }
    importance_ = options_.gaussian
                      ? importanceMap(patch, options_.sigma_scale, options_.convention)
                      : std::vector<float>(static_cast<size_t>(numel(patch)), 1.0f);
    return Status::ok();
}

std::string SlidingWindow::describe() const {
    const std::string sums = options_.accumulation == Accumulation::kNnUNetFp16
                                 ? "nnU-Net's fp16 arithmetic"
                             : options_.accumulator == DType::kFloat16 ? "fp16 accumulator"
                                                                       : "fp32 accumulator";
    return "host sliding window (" + sums +
           (networks_.size() > 1 ? ", " + std::to_string(networks_.size()) + " networks" : "") +
           ")";
}

Result<std::vector<int16_t>> VolumeInference::runLabels(const Tensor& image,
                                                        std::span<const int> values,
                                                        const Progress& progress,
                                                        SlidingWindowStats* stats) {
    VOXSEG_ASSIGN_OR_RETURN(Tensor scores, run(image, progress, stats));
    std::vector<int16_t> labels(
        static_cast<size_t>(scores.numel() / std::max<int64_t>(1, scores.dim(0))));
    VOXSEG_RETURN_IF_ERROR(argmaxLabels(scores, std::span<int16_t>(labels), values));
    return labels;
}

Result<Tensor> SlidingWindow::run(const Tensor& image, const Progress& progress,
                                  SlidingWindowStats* stats) {
    return runImpl(image, progress, stats, nullptr);
}

Result<std::vector<int16_t>> SlidingWindow::runLabels(const Tensor& image,
                                                      std::span<const int> values,
                                                      const Progress& progress,
                                                      SlidingWindowStats* stats) {
    if (options_.accumulation != Accumulation::kNnUNetFp16 || networks_.size() != 1)
        return VolumeInference::runLabels(image, values, progress, stats);
    if (!values.empty() && static_cast<int64_t>(values.size()) != num_classes_)
        return invalidArgument("label value table has " + std::to_string(values.size()) +
                               " entries for " + std::to_string(num_classes_) + " channels");
    for (int v : values)
        if (v < 0 || v > std::numeric_limits<int16_t>::max())
            return invalidArgument("label value " + std::to_string(v) +
                                   " does not fit the label type (0 to 32767)");
    if (values.empty() && num_classes_ - 1 > std::numeric_limits<int16_t>::max())
        return invalidArgument(std::to_string(num_classes_) + " channels do not fit int16 labels");
    LabelsRequest request{values, {}};
    VOXSEG_RETURN_IF_ERROR(runImpl(image, progress, stats, &request).status());
    return std::move(request.labels);
}

namespace {

// What every run checks of its input: float32 [C, spatial...] with the network's C channels and
// no empty axis, as many spatial axes as the patch.
Status checkWindowInput(const SlidingWindowOptions& options, const Tensor& image,
                        int64_t channels) {
    VOXSEG_RETURN_IF_ERROR(validateSlidingWindowOptions(options, image.shape()));
    if (image.dtype() != DType::kFloat32)
        return invalidArgument(std::string("sliding-window input must be float32, got ") +
                               dtypeName(image.dtype()));
    if (image.dim(0) != channels)
        return invalidArgument("image has " + std::to_string(image.dim(0)) +
                               " channels, the network takes " + std::to_string(channels));
    for (size_t a = 1; a < image.shape().size(); ++a)
        if (image.dim(a) <= 0)
            return invalidArgument("image " + shapeToString(image.shape()) + " is empty");
    return Status::ok();
}

struct WindowBuffers {
    Tensor padded_image;                // the image zero-padded to the grid (when it pads)
    Tensor accumulator;                 // [K, padded...] weighted sums (host accumulation)
    std::vector<float> inverse_weight;  // per padded voxel: 1 / the sum of window weights
};

// The padded copy of `image` when the grid pads, and the accumulator of type `accumulator` (none:
// nnU-Net's accumulation or a window handed through) with its inverse weight sums (of the
// patch weights `importance`). Out of memory is refused naming `accumulator_bytes`.
Result<WindowBuffers> allocateWindowBuffers(const Tensor& image, const WindowGrid& grid,
                                            size_t rank, int64_t channels, int64_t classes,
                                            std::optional<DType> accumulator,
                                            size_t accumulator_bytes,
                                            const std::vector<float>& importance) {
    WindowBuffers b;
    try {
        if (grid.needs_pad) {
            Shape shape = {channels};
            for (size_t a = 3 - rank; a < 3; ++a) shape.push_back(grid.padded[a]);
            b.padded_image = Tensor(DType::kFloat32, shape);
            copyBox<float>(image.data<float>(), grid.dims, b.padded_image.data<float>(),
                           grid.padded, channels, grid.pad_before, false);
        }
        if (accumulator) {
            Shape acc_shape = {classes};
            for (size_t a = 3 - rank; a < 3; ++a) acc_shape.push_back(grid.padded[a]);
            b.accumulator = Tensor(*accumulator, acc_shape);
            b.inverse_weight.assign(static_cast<size_t>(grid.voxels), 0.0f);
        }
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory,
                      "cannot allocate the sliding-window accumulators (" +
                          std::to_string(accumulator_bytes >> 20) + " MiB for " +
                          std::to_string(classes) + " classes)");
    }
    // Weight sums depend only on the grid: accumulate them once, then store their inverse.
    if (accumulator) inverseWeightSums(grid, importance, b.inverse_weight);
    return b;
}

// The batch of items [first, first + count) into `in`: item i is window i / flips mirrored by
// flip set i % flips, gathered from the (padded) image `source`; zeros fill a batch of `batch`.
void gatherBatch(const float* source, const WindowGrid& grid, int64_t channels,
                 const std::vector<unsigned>& flip_sets, int64_t first, int64_t count,
                 int64_t batch, float* in) {
    const int64_t flips = static_cast<int64_t>(flip_sets.size());
    const int64_t item_size = channels * grid.patch[0] * grid.patch[1] * grid.patch[2];
    for (int64_t i = 0; i < count; ++i) {
        const int64_t item = first + i;
        gatherPatch(source, grid.padded, channels, gridOrigin(grid, item / flips), grid.patch,
                    flip_sets[static_cast<size_t>(item % flips)], in + i * item_size);
    }
    if (count < batch)
        std::memset(in + count * item_size, 0,
                    static_cast<size_t>((batch - count) * item_size) * sizeof(float));
}

// Runs `network` and checks that the backend returned the float32 output it was compiled for.
Status runChecked(CompiledGraph& network, const std::vector<Tensor>& inputs,
                  std::vector<Tensor>& outputs) {
    VOXSEG_RETURN_IF_ERROR(network.run(inputs, outputs));
    if (outputs.empty() || outputs[0].shape() != network.outputShapes()[0] ||
        outputs[0].dtype() != DType::kFloat32)
        return internalError(
            "backend returned output " +
            (outputs.empty() ? std::string("none") : shapeToString(outputs[0].shape())) +
            ", compiled for " + shapeToString(network.outputShapes()[0]));
    return Status::ok();
}

}  // namespace

Result<Tensor> SlidingWindow::runImpl(const Tensor& image, const Progress& progress,
                                      SlidingWindowStats* stats, LabelsRequest* labels) {
    const auto start_time = Clock::now();
    VOXSEG_RETURN_IF_ERROR(checkWindowInput(options_, image, channels_));
    const size_t rank = options_.patch_size.size();
    const std::vector<int64_t> spatial(image.shape().begin() + 1, image.shape().end());

    const WindowGrid grid = windowGrid(options_, spatial);
    // References, not structured bindings: lambdas below capture them (clang 14 cannot).
    const auto& patch = grid.patch;
    const auto& dims = grid.dims;
    const auto& padded = grid.padded;
    const auto& starts = grid.starts;
    const bool needs_pad = grid.needs_pad;
    const int64_t voxels = grid.voxels;
    const int64_t num_windows = grid.num_windows;
    const int64_t classes = num_classes_;
    const bool nnunet = options_.accumulation == Accumulation::kNnUNetFp16;
    const std::vector<unsigned> flip_sets = flipSets(options_.mirror_axes, rank, nnunet);
    const int64_t num_flips = static_cast<int64_t>(flip_sets.size());
    const int64_t num_items = num_windows * num_flips;
    const int64_t batch = options_.batch;
    const int64_t num_batches = (num_items + batch - 1) / batch;

    const int64_t num_networks = static_cast<int64_t>(networks_.size());
    const auto accumulatorBytes = [&](int64_t k, int64_t n) {
        return sumsBytes(nnunet, num_networks, options_.accumulator, k, n);
    };
    // One window covering the whole (unpadded) image, no mirroring, one network, fp32 scores:
    // the weighted average is the network output itself (w * p / w), so it is handed through
    // without the accumulators (deepbet's fixed 256^3 grid: 192 MiB of fresh pages and two
    // passes saved).
    const bool pass_through = num_items == 1 && batch == 1 && num_networks == 1 && !needs_pad &&
                              options_.accumulator == DType::kFloat32 && !nnunet;
    VOXSEG_RETURN_IF_ERROR(checkSumsFitMemory(
        (pass_through ? 0 : accumulatorBytes(classes, voxels)) +
            (needs_pad ? static_cast<size_t>(channels_ * voxels) * sizeof(float) : 0),
        classes, voxels, !nnunet && options_.accumulator == DType::kFloat32));
    VOXSEG_ASSIGN_OR_RETURN(
        WindowBuffers buffers,
        allocateWindowBuffers(
            image, grid, rank, channels_, classes,
            pass_through || nnunet ? std::nullopt : std::optional(options_.accumulator),
            accumulatorBytes(classes, voxels), importance_));
    Tensor& padded_image = buffers.padded_image;
    Tensor& accumulator = buffers.accumulator;
    std::vector<float>& inverse_weight = buffers.inverse_weight;
    const float* source = needs_pad ? padded_image.data<float>() : image.data<float>();

    // Mirrored copies of a patch and ensemble members share its weight: each network output
    // contributes importance / (num_flips * num_networks), i.e. outputs are averaged first.
    const int64_t patch_voxels = patch[0] * patch[1] * patch[2];
    std::vector<float> item_weight;
    if (!pass_through && !nnunet) {
        item_weight = importance_;
        for (float& w : item_weight) w /= static_cast<float>(num_flips * num_networks);
    }

    Shape input_shape = networks_[0]->inputShapes()[0];
    std::vector<Tensor> inputs = {Tensor(DType::kFloat32, input_shape)};
    std::vector<Tensor> outputs;
    const int64_t input_item = channels_ * patch_voxels;
    const int64_t output_item = classes * patch_voxels;
    const size_t patch_buffer_bytes =
        static_cast<size_t>(batch * (input_item + output_item)) * sizeof(float);

    auto itemOrigin = [&](int64_t window) { return gridOrigin(grid, window); };

    double network_seconds = 0.0;
    int64_t padded_items = 0;
    const bool half_acc = options_.accumulator == DType::kFloat16;
    std::vector<float> row(static_cast<size_t>(patch[2]));
    // Runs every batch through networks [first_net, last_net) and hands each network output to
    // on_output(item, output of that item); pass / passes place the batches in the progress.
    const BatchRunner forEachOutput = [&](size_t first_net, size_t last_net, int64_t pass,
                                          int64_t passes, const OutputSink& on_output) -> Status {
        for (int64_t b = 0; b < num_batches; ++b) {
            VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
            const int64_t first = b * batch;
            const int64_t count = std::min(batch, num_items - first);
            gatherBatch(source, grid, channels_, flip_sets, first, count, batch,
                        inputs[0].data<float>());
            padded_items += batch - count;
            for (size_t m = first_net; m < last_net; ++m) {
                const auto net_start = Clock::now();
                Status st = runChecked(*networks_[m], inputs, outputs);
                network_seconds += secondsSince(net_start);
                if (!st.isOk())
                    return st.withContext("sliding window, batch " + std::to_string(b + 1) +
                                          " of " + std::to_string(num_batches) + ": ");
                const float* out = outputs[0].data<float>();
                for (int64_t i = 0; i < count; ++i) on_output(first + i, out + i * output_item);
            }
            progress.report(static_cast<size_t>(pass * num_batches + b + 1),
                            static_cast<size_t>(passes * num_batches), "sliding window");
        }
        return Status::ok();
    };
    progress.report(0.0, "sliding window");
    size_t label_sums_bytes = 0;
    if (nnunet && labels) {  // runLabels: one network, reduced to labels as planes become final
        const NnUNetGrid nnunet_grid{grid, flip_sets, classes, networks_.size(), importance_half_};
        labels->labels.assign(static_cast<size_t>(dims[0] * dims[1] * dims[2]), 0);
        VOXSEG_RETURN_IF_ERROR(nnunetLabels(nnunet_grid, forEachOutput, labels->values,
                                            std::span<int16_t>(labels->labels), &label_sums_bytes));
    } else if (nnunet) {
        const NnUNetGrid nnunet_grid{grid, flip_sets, classes, networks_.size(), importance_half_};
        VOXSEG_ASSIGN_OR_RETURN(Tensor sums, nnunetAccumulate(nnunet_grid, forEachOutput));
        Shape acc_shape = {classes};
        for (size_t a = 3 - rank; a < 3; ++a) acc_shape.push_back(padded[a]);
        accumulator = sums.reshaped(acc_shape);
    } else if (pass_through) {
        Shape shape = {classes};
        shape.insert(shape.end(), spatial.begin(), spatial.end());
        VOXSEG_RETURN_IF_ERROR(forEachOutput(
            0, 1, 0, 1, [&](int64_t, const float*) { accumulator = outputs[0].reshaped(shape); }));
    } else {
        VOXSEG_RETURN_IF_ERROR(
            forEachOutput(0, networks_.size(), 0, 1, [&](int64_t item, const float* out) {
                const unsigned flips = flip_sets[static_cast<size_t>(item % num_flips)];
                if (half_acc)
                    scatterPatch(out, item_weight.data(), inverse_weight.data(), patch, classes,
                                 flips, itemOrigin(item / num_flips), padded, row.data(),
                                 accumulator.data<uint16_t>());
                else
                    scatterPatch(out, item_weight.data(), inverse_weight.data(), patch, classes,
                                 flips, itemOrigin(item / num_flips), padded, row.data(),
                                 accumulator.data<float>());
            }));
    }

    // The batch's patches are spent: their memory back before the crop copies the sums.
    inputs.clear();
    outputs.clear();
    padded_image = Tensor();
    const Tensor result = labels      ? Tensor()
                          : needs_pad ? cropToImage(accumulator, grid, classes, spatial)
                                      : accumulator;

    if (stats) {
        *stats = SlidingWindowStats{};
        stats->patches = num_windows;
        stats->forward_passes = num_batches * num_networks;
        stats->padded_items = padded_items;
        stats->seconds = secondsSince(start_time);
        stats->network_seconds = network_seconds;
        stats->accumulator_bytes = labels ? label_sums_bytes : accumulatorBytes(classes, voxels);
        stats->patch_buffer_bytes = patch_buffer_bytes;
        for (const auto& network : networks_) stats->workspace_bytes += network->workspaceBytes();
        for (size_t a = 3 - rank; a < 3; ++a)
            stats->grid.push_back(static_cast<int64_t>(starts[a].size()));
    }
    log::debug("engine",
               "sliding window: {} windows x {} flips in {} batches of {}, {:.2f} s "
               "({:.2f} s in the network)",
               num_windows, num_flips, num_batches, batch, secondsSince(start_time),
               network_seconds);
    return result;
}

Result<Tensor> slidingWindowInference(Backend& backend, const Graph& graph, const Tensor& image,
                                      const SlidingWindowOptions& options, const Progress& progress,
                                      SlidingWindowStats* stats) {
    VOXSEG_RETURN_IF_ERROR(validateSlidingWindowOptions(options, image.shape()));
    VOXSEG_ASSIGN_OR_RETURN(auto sw, SlidingWindow::create(backend, graph, image.dim(0), options));
    return sw->run(image, progress, stats);
}

Tensor scoresAsFloat32(const Tensor& scores) {
    if (scores.dtype() != DType::kFloat16) return scores.clone();
    Tensor out(DType::kFloat32, scores.shape());
    half::toFloatRow(scores.data<uint16_t>(), out.data<float>(), scores.numel());
    return out;
}

void softmaxChannelsInPlace(Tensor& scores) {
    assert(scores.dtype() == DType::kFloat32 && scores.rank() >= 1);
    const int64_t classes = scores.dim(0);
    if (classes == 0) return;
    const int64_t voxels = scores.numel() / classes;
    float* s = scores.data<float>();
    std::vector<float> max_v(s, s + voxels), sum(static_cast<size_t>(voxels), 0.0f);
    for (int64_t k = 1; k < classes; ++k)
        for (int64_t v = 0; v < voxels; ++v) max_v[v] = std::max(max_v[v], s[k * voxels + v]);
    for (int64_t k = 0; k < classes; ++k) {
        float* sk = s + k * voxels;
        for (int64_t v = 0; v < voxels; ++v) {
            sk[v] = std::exp(sk[v] - max_v[v]);
            sum[v] += sk[v];
        }
    }
    for (float& v : sum) v = 1.0f / v;
    for (int64_t k = 0; k < classes; ++k) {
        float* sk = s + k * voxels;
        for (int64_t v = 0; v < voxels; ++v) sk[v] *= sum[v];
    }
}

void sigmoidInPlace(Tensor& scores) {
    assert(scores.dtype() == DType::kFloat32);
    float* s = scores.data<float>();
    const int64_t n = scores.numel();
    for (int64_t i = 0; i < n; ++i) s[i] = 1.0f / (1.0f + std::exp(-s[i]));
}

Status argmaxLabels(const Tensor& scores, std::span<uint8_t> out, std::span<const int> values) {
    return argmaxImpl(scores, out, values, false, 0.0f);
}
Status argmaxLabels(const Tensor& scores, std::span<int16_t> out, std::span<const int> values) {
    return argmaxImpl(scores, out, values, false, 0.0f);
}
Status thresholdLabels(const Tensor& scores, float threshold, std::span<uint8_t> out,
                       std::span<const int> values) {
    return argmaxImpl(scores, out, values, true, threshold);
}
Status thresholdLabels(const Tensor& scores, float threshold, std::span<int16_t> out,
                       std::span<const int> values) {
    return argmaxImpl(scores, out, values, true, threshold);
}

// The Backend contract's default (engine/backend.h), defined here so that the contract does not
// include the room above it.
Result<std::unique_ptr<VolumeInference>> Backend::makeSlidingWindow(
    const std::vector<const Graph*>& graphs, int64_t channels,
    const SlidingWindowOptions& options) {
    VOXSEG_ASSIGN_OR_RETURN(auto window, SlidingWindow::create(*this, graphs, channels, options));
    return std::unique_ptr<VolumeInference>(std::move(window));
}

}  // namespace voxseg::engine
