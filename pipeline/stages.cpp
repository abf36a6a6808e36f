#include "pipeline/stages.h"

#include "core/clock.h"
#include "core/log.h"
#include "pipeline/mask_input.h"
#include "pipeline/monai_spacing.h"
#include "pipeline/normalization.h"
#include "pipeline/orientation.h"
#include "pipeline/pixel_dispatch.h"
#include "pipeline/postprocess.h"
#include "pipeline/prediction_export.h"
#include "pipeline/resample.h"
#include "pipeline/spline_resample.h"
#include "pipeline/stage_quantization.h"
#include "pipeline/tensor_layout.h"
#include "pipeline/totalseg_grid.h"
#include "pipeline/valid_tiles.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace voxseg::pipeline {
namespace {

constexpr const char* kComponent = "stages";

using engine::Interpolation;
using engine::StageOutputKind;
using engine::StageSpec;

// PyTorch: scale = (float)in / out; src = min(floor((d + 0.5) * scale), in - 1) with the product
// in double (nearest_neighbor_exact_compute_source_index).
std::vector<int64_t> nearestExactIndex(int64_t in, int64_t out) {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    std::vector<int64_t> idx(static_cast<size_t>(out));
    for (int64_t d = 0; d < out; ++d)
        idx[static_cast<size_t>(d)] = std::min(
            static_cast<int64_t>(std::floor((static_cast<double>(d) + 0.5) * scale)), in - 1);
    return idx;
}

Status checkSize(const Volume& volume, const std::array<int64_t, 3>& size) {
    if (volume.empty()) return invalidArgument("resize: empty volume");
    for (int64_t n : size)
        if (n < 1) return invalidArgument("resize: target size must be at least 1 per axis");
    return Status::ok();
}

// One axis of a separable linear resize (PyTorch align_corners=False, or scikit-image order 1
// with mode "edge": the same source positions, clamped): `in` holds sizes `dims`, axis `axis`
// goes to `out_n`. `nearest`: order 0 instead (scipy map_coordinates order 0 on the same
// positions, i.e. source voxel floor((d + 0.5) * in / out)). T: float (PyTorch's float32
// arithmetic) or double (scikit-image's float64).
template <typename T>
std::vector<T> linearAxis(const std::vector<T>& in, std::array<int64_t, 3>& dims, int axis,
                          int64_t out_n, bool nearest = false) {
    const int64_t n = dims[static_cast<size_t>(axis)];
    std::array<int64_t, 3> od = dims;
    od[static_cast<size_t>(axis)] = out_n;
    std::vector<T> out(static_cast<size_t>(od[0] * od[1] * od[2]));
    const double scale = static_cast<double>(n) / static_cast<double>(out_n);
    std::vector<int64_t> i0(static_cast<size_t>(out_n)), i1(static_cast<size_t>(out_n));
    std::vector<T> w(static_cast<size_t>(out_n));
    for (int64_t d = 0; d < out_n; ++d) {
        if (nearest) {
            const auto at =
                static_cast<int64_t>(std::floor((static_cast<double>(d) + 0.5) * scale));
            i0[static_cast<size_t>(d)] = i1[static_cast<size_t>(d)] = std::min(at, n - 1);
            w[static_cast<size_t>(d)] = T(0);
            continue;
        }
        const double src = std::max(0.0, (static_cast<double>(d) + 0.5) * scale - 0.5);
        const auto lo = std::min(static_cast<int64_t>(src), n - 1);
        i0[static_cast<size_t>(d)] = lo;
        i1[static_cast<size_t>(d)] = std::min(lo + 1, n - 1);
        w[static_cast<size_t>(d)] = static_cast<T>(src - static_cast<double>(lo));
    }
    const std::array<int64_t, 3> in_stride{1, dims[0], dims[0] * dims[1]};
    int64_t o = 0;
    for (int64_t k = 0; k < od[2]; ++k)
        for (int64_t j = 0; j < od[1]; ++j)
            for (int64_t i = 0; i < od[0]; ++i, ++o) {
                std::array<int64_t, 3> at{i, j, k};
                const int64_t d = at[static_cast<size_t>(axis)];
                at[static_cast<size_t>(axis)] = 0;
                const int64_t base =
                    at[0] * in_stride[0] + at[1] * in_stride[1] + at[2] * in_stride[2];
                const int64_t s = in_stride[static_cast<size_t>(axis)];
                const T a = in[static_cast<size_t>(base + i0[static_cast<size_t>(d)] * s)];
                const T b = in[static_cast<size_t>(base + i1[static_cast<size_t>(d)] * s)];
                out[static_cast<size_t>(o)] = a + (b - a) * w[static_cast<size_t>(d)];
            }
    dims = od;
    return out;
}

// A label volume (uint8 when every value fits, else uint16) from per-voxel labels in tensor order.
Result<Volume> labelsToVolume(const std::vector<int16_t>& labels, const Geometry& grid,
                              engine::AxisOrder order, int max_label) {
    const auto dims = tensorDims(grid, order);
    engine::Tensor t(engine::DType::kFloat32, {1, dims[0], dims[1], dims[2]});
    float* p = t.data<float>();
    for (size_t i = 0; i < labels.size(); ++i) p[i] = static_cast<float>(labels[i]);
    VOXSEG_ASSIGN_OR_RETURN(Volume f, tensorChannelToVolume(t, 0, grid, order));
    return f.castTo(max_label <= 255 ? PixelType::kUInt8 : PixelType::kUInt16);
}

// The stage's labels per network voxel (tensor order) from its scores [K, D0, D1, D2], float32
// or float16 (an nnunet-fp16 window's: the argmax and threshold read them as they are, without
// a float32 copy of all K channels).
Result<std::vector<int16_t>> stageLabels(const engine::Tensor& half_or_float,
                                         const StageSpec& stage) {
    const bool widen = half_or_float.dtype() == engine::DType::kFloat16 &&
                       (stage.output.kind == StageOutputKind::kRegions ||
                        stage.output.kind == StageOutputKind::kProbability);
    const engine::Tensor scores = widen ? engine::scoresAsFloat32(half_or_float) : half_or_float;
    const int64_t n = scores.numel() / scores.dim(0);
    std::vector<int16_t> out(static_cast<size_t>(n), 0);
    const std::vector<int> values = stage.channelLabelValues();
    switch (stage.output.kind) {
        case StageOutputKind::kSoftmax:
            VOXSEG_RETURN_IF_ERROR(engine::argmaxLabels(scores, std::span<int16_t>(out), values));
            break;
        case StageOutputKind::kSigmoid: {
            // sigmoid(x) >= t  <=>  x >= log(t / (1 - t)) on logits.
            const double t = stage.output.threshold;
            VOXSEG_RETURN_IF_ERROR(
                engine::thresholdLabels(scores, static_cast<float>(std::log(t / (1.0 - t))),
                                        std::span<int16_t>(out), values));
            break;
        }
        case StageOutputKind::kRegions: {
            // sigmoid(x) > 0.5 <=> x > 0; later regions paint over earlier ones (nnU-Net).
            const float* p = scores.data<float>();
            for (size_t c = 0; c < stage.output.labels.size(); ++c) {
                const auto label = static_cast<int16_t>(stage.output.labels[c]);
                const float* pc = p + static_cast<int64_t>(c) * n;
                for (int64_t i = 0; i < n; ++i)
                    if (pc[i] > 0.0f) out[static_cast<size_t>(i)] = label;
            }
            break;
        }
        case StageOutputKind::kProbability: {
            const float* p = scores.data<float>() + stage.output.channel * n;
            const float t = static_cast<float>(stage.output.threshold);
            const auto label = static_cast<int16_t>(stage.output.labels.at(0));
            for (int64_t i = 0; i < n; ++i)  // deepbet: mask > threshold
                if (p[i] > t) out[static_cast<size_t>(i)] = label;
            break;
        }
    }
    return out;
}

HoleFilling holeFilling(engine::FillHoles f) {
    return f == engine::FillHoles::k3D         ? HoleFilling::k3D
           : f == engine::FillHoles::kPerSlice ? HoleFilling::kPerSlice
                                               : HoleFilling::kNone;
}

// The stage's post-processing (engine::StagePostprocess) on `labels`, which hold its values.
Status postprocessStage(Volume& labels, const StageSpec& stage) {
    const engine::StagePostprocess& pp = stage.postprocess;
    if (!pp.any()) return Status::ok();
    std::vector<LabelPostprocess> steps;
    for (int v : stage.output.labels) {
        const auto own = pp.labels.find(v);
        const engine::PostprocessRule& rule = own != pp.labels.end() ? own->second : pp;
        if (!rule.any()) continue;
        PostprocessOptions o;
        o.largest_component = rule.largest_component;
        o.min_component_ml = rule.min_component_ml;
        o.fill_holes = holeFilling(rule.fill_holes);
        o.fully_connected = pp.fully_connected;
        steps.push_back({v, o});
    }
    VOXSEG_ASSIGN_OR_RETURN(auto reports, postprocess(labels, steps));
    for (const auto& r : reports)
        log::debug(kComponent, "stage {} label {}: {} voxels removed, {} filled", stage.name,
                   r.label, r.voxels_removed, r.voxels_filled);
    return Status::ok();
}

// Post-processing on the input grid (and the network grid a crop link reads), unless the
// stage does it on its own resampled grid (totalSegmentatorStage).
Status runPostprocess(Volume& labels, const StageSpec& stage) {
    if (stage.postprocess.on_stage_grid) return Status::ok();
    return postprocessStage(labels, stage);
}

int64_t countNonzero(const Volume& labels) {
    int64_t count = 0;
    withPixelType(labels.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        const T* p = labels.data<T>();
        for (int64_t i = 0, n = labels.geometry().voxelCount(); i < n; ++i) count += p[i] != T(0);
    });
    return count;
}

}  // namespace

Result<Volume> resizeNearestExact(const Volume& volume, const std::array<int64_t, 3>& size) {
    VOXSEG_RETURN_IF_ERROR(checkSize(volume, size));
    const Geometry g = volume.geometry();
    const Geometry target = resampledGeometry(g, size);
    const auto ii = nearestExactIndex(g.size[0], size[0]);
    const auto jj = nearestExactIndex(g.size[1], size[1]);
    const auto kk = nearestExactIndex(g.size[2], size[2]);
    return withPixelType(volume.pixelType(), [&](auto tag) -> Result<Volume> {
        using T = decltype(tag);
        Volume out = Volume::allocateUninitialized<T>(target, volume.info());
        const T* src = volume.data<T>();
        T* dst = out.data<T>();
        for (int64_t k = 0; k < size[2]; ++k)
            for (int64_t j = 0; j < size[1]; ++j) {
                const T* row =
                    src + (kk[static_cast<size_t>(k)] * g.size[1] + jj[static_cast<size_t>(j)]) *
                              g.size[0];
                for (int64_t i = 0; i < size[0]; ++i) *dst++ = row[ii[static_cast<size_t>(i)]];
            }
        return out;
    });
}

Result<Volume> resizeLinear(const Volume& volume, const std::array<int64_t, 3>& size) {
    VOXSEG_RETURN_IF_ERROR(checkSize(volume, size));
    const Geometry g = volume.geometry();
    Volume f =
        volume.pixelType() == PixelType::kFloat32 ? volume : volume.castTo(PixelType::kFloat32);
    std::vector<float> data(f.data<float>(), f.data<float>() + g.voxelCount());
    std::array<int64_t, 3> dims = g.size;
    for (int a = 0; a < 3; ++a)
        if (dims[static_cast<size_t>(a)] != size[static_cast<size_t>(a)])
            data = linearAxis(data, dims, a, size[static_cast<size_t>(a)]);
    Volume out = Volume::allocateUninitialized<float>(resampledGeometry(g, size), volume.info());
    std::memcpy(out.data<float>(), data.data(), data.size() * sizeof(float));
    return out;
}

Result<Volume> resampleSegmentation(const Volume& labels, const std::array<int64_t, 3>& size,
                                    int separate_axis) {
    VOXSEG_RETURN_IF_ERROR(checkSize(labels, size));
    if (labels.pixelType() != PixelType::kUInt8 && labels.pixelType() != PixelType::kUInt16)
        return invalidArgument("resampleSegmentation: expected a uint8 or uint16 label map");
    const Geometry g = labels.geometry();
    if (g.size == size) return labels;
    return withPixelType(labels.pixelType(), [&](auto tag) -> Result<Volume> {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>) {
            const T* src = labels.data<T>();
            const auto n = static_cast<size_t>(g.voxelCount());
            std::vector<bool> present(65536, false);
            for (size_t i = 0; i < n; ++i) present[src[i]] = true;
            Volume out = Volume::allocate<T>(resampledGeometry(g, size), labels.info());
            T* dst = out.data<T>();
            for (int value = 1; value < 65536; ++value) {  // ascending, as np.unique; 0 is the fill
                if (!present[static_cast<size_t>(value)]) continue;
                std::vector<double> m(n);  // float64, as scikit-image interpolates
                for (size_t i = 0; i < n; ++i) m[i] = src[i] == value ? 1.0 : 0.0;
                std::array<int64_t, 3> dims = g.size;
                for (int a = 0; a < 3; ++a)
                    if (dims[static_cast<size_t>(a)] != size[static_cast<size_t>(a)])
                        m = linearAxis(m, dims, a, size[static_cast<size_t>(a)],
                                       a == separate_axis);
                for (size_t i = 0; i < m.size(); ++i)
                    if (m[i] >= 0.5) dst[i] = static_cast<T>(value);
            }
            return out;
        } else {
            return invalidArgument("resampleSegmentation: expected a uint8 or uint16 label map");
        }
    });
}

std::vector<Volume> oneHotChannels(const Volume& labels, const std::vector<int>& values) {
    std::vector<Volume> out;
    const int64_t n = labels.geometry().voxelCount();
    for (int value : values) {
        Volume c = Volume::allocate<float>(labels.geometry());
        float* dst = c.data<float>();
        withPixelType(labels.pixelType(), [&](auto tag) {
            using T = decltype(tag);
            const T* src = labels.data<T>();
            for (int64_t i = 0; i < n; ++i)
                dst[i] = static_cast<double>(src[i]) == value ? 1.0f : 0.0f;
        });
        out.push_back(std::move(c));
    }
    return out;
}

Result<Volume> resizeImage(const Volume& volume, const std::array<int64_t, 3>& size,
                           Interpolation interpolation, int threads) {
    switch (interpolation) {
        case Interpolation::kNearestExact: {
            VOXSEG_ASSIGN_OR_RETURN(Volume v, resizeNearestExact(volume, size));
            return v.pixelType() == PixelType::kFloat32 ? v : v.castTo(PixelType::kFloat32);
        }
        case Interpolation::kLinear:
            return resizeLinear(volume, size);
        case Interpolation::kSpline3: {
            VOXSEG_RETURN_IF_ERROR(checkSize(volume, size));
            Volume f = volume.pixelType() == PixelType::kFloat32
                           ? volume
                           : volume.castTo(PixelType::kFloat32);
            if (f.geometry().size == size) return f;
            std::array<AxisInterpolation, 3> per_axis;
            per_axis.fill(AxisInterpolation::kSpline);
            return splineResample(f, resampledGeometry(f.geometry(), size), per_axis, threads);
        }
    }
    return invalidArgument("resize: unknown interpolation");
}

std::optional<CropBox> linkBox(const Volume& labels, const CropBox& region,
                               const Geometry& oriented, const engine::CropLink& link) {
    const Geometry g = labels.geometry();
    std::array<std::vector<int64_t>, 3> count;
    for (int a = 0; a < 3; ++a)
        count[static_cast<size_t>(a)].assign(static_cast<size_t>(g.size[a]), 0);
    withPixelType(labels.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        const T* p = labels.data<T>();
        const T want = static_cast<T>(link.label);
        for (int64_t k = 0; k < g.size[2]; ++k)
            for (int64_t j = 0; j < g.size[1]; ++j)
                for (int64_t i = 0; i < g.size[0]; ++i)
                    if (*p++ == want) {
                        ++count[0][static_cast<size_t>(i)];
                        ++count[1][static_cast<size_t>(j)];
                        ++count[2][static_cast<size_t>(k)];
                    }
    });
    CropBox box;
    for (int a = 0; a < 3; ++a) {
        const auto ua = static_cast<size_t>(a);
        // deepbet's get_bbox: x.mean(other axes) > threshold, i.e. the slice's label fraction.
        const double plane = static_cast<double>(g.voxelCount()) / static_cast<double>(g.size[a]);
        int64_t lo = -1, hi = -1;
        for (int64_t s = 0; s < g.size[a]; ++s) {
            const double fraction = static_cast<double>(count[ua][static_cast<size_t>(s)]) / plane;
            if (count[ua][static_cast<size_t>(s)] > 0 && fraction > link.slice_fraction) {
                if (lo < 0) lo = s;
                hi = s;
            }
        }
        if (lo < 0) return std::nullopt;
        // get_bbox_with_margin, in float32 as torch computes it: centre and size scaled to the
        // region's voxels, size x (1 + 2 margin), both rounded half to even, ends truncated.
        const float scale = static_cast<float>(region.size[ua]) / static_cast<float>(g.size[a]);
        float centre = static_cast<float>(hi + 1 + lo) / 2.0f * scale;
        float extent = static_cast<float>(hi + 1 - lo) * scale;
        extent = (1.0f + 2.0f * static_cast<float>(link.margin_fraction)) * extent;
        if (link.margin_mm > 0)
            extent += static_cast<float>(2.0 * link.margin_mm / oriented.spacing[ua]);
        centre = std::nearbyint(centre);
        extent = std::nearbyint(extent);
        const auto begin = static_cast<int64_t>(centre - extent / 2.0f);
        const auto end = static_cast<int64_t>(centre + extent / 2.0f);
        const int64_t b = std::max<int64_t>(0, region.begin[ua] + begin);
        const int64_t e = std::min<int64_t>(oriented.size[ua], region.begin[ua] + end);
        if (e <= b) return std::nullopt;
        box.begin[ua] = b;
        box.size[ua] = e - b;
    }
    return box;
}

namespace {

int maxLabel(const std::vector<int>& labels) {
    int m = 0;
    for (int v : labels) m = std::max(m, v);
    return m;
}

// The stage's network grid size (index axes) for its region: a fixed shape or its spacing.
std::array<int64_t, 3> networkSize(const StageSpec& st, const Geometry& cropped,
                                   engine::AxisOrder order) {
    std::array<int64_t, 3> size{};
    if (!st.shape.empty()) {
        const std::array<double, 3> shape{static_cast<double>(st.shape[0]),
                                          static_cast<double>(st.shape[1]),
                                          static_cast<double>(st.shape[2])};
        const Vec3 idx = toIndexOrder(shape, order);
        for (int a = 0; a < 3; ++a) size[static_cast<size_t>(a)] = static_cast<int64_t>(idx[a]);
        return size;
    }
    const std::array<double, 3> mm{st.spacing_mm[0], st.spacing_mm[1], st.spacing_mm[2]};
    if (st.grid == engine::StageGrid::kMonai)
        return monaiSpacingSize(cropped, toIndexOrder(mm, order));
    return resampledSize(cropped, toIndexOrder(mm, order));
}

// The stage's labels on the oriented grid (not post-processed): nearest-exact stages resize their
// network labels back (deepbet); the others interpolate their scores as nnU-Net exports them
// (prediction_export.h; regions: each channel's logits, > 0 painted in channel order).
Result<Volume> labelsOnOriented(const engine::Tensor& scores, const std::vector<int16_t>& values,
                                const StageSpec& st, const CropBox& region, const Geometry& og,
                                const Geometry& net_grid, engine::AxisOrder order, int threads) {
    const int top = maxLabel(st.output.labels);
    if (st.grid == engine::StageGrid::kMonai) {  // Activationsd softmax, Invertd, AsDiscreted
        VOXSEG_ASSIGN_OR_RETURN(
            Volume back, monaiSoftmaxToLabels(scores, net_grid, order, croppedGeometry(og, region),
                                              st.channelLabelValues(), top));
        if (region.covers(og)) return back;
        return paste(back, og, region, 0.0);
    }
    if (st.interpolation == Interpolation::kNearestExact) {
        VOXSEG_ASSIGN_OR_RETURN(Volume lab, labelsToVolume(values, net_grid, order, top));
        VOXSEG_ASSIGN_OR_RETURN(Volume back, resizeNearestExact(lab, region.size));
        Volume::applyGeometry(croppedGeometry(og, region), *back.base());
        if (region.covers(og)) return back;
        return paste(back, og, region, 0.0);
    }
    PreprocessRecord record;  // original == oriented: the caller un-orients
    record.original = og;
    record.oriented = og;
    record.crop = region;
    record.cropped = croppedGeometry(og, region);
    record.network = net_grid;
    record.axis_order = order;
    if (st.output.kind == StageOutputKind::kRegions) {
        Volume out = top <= 255 ? Volume::allocate<uint8_t>(og) : Volume::allocate<uint16_t>(og);
        for (size_t c = 0; c < st.output.labels.size(); ++c) {
            VOXSEG_ASSIGN_OR_RETURN(
                Volume logit,
                scoreChannelToOriginal(scores, static_cast<int64_t>(c), record, -1.0));
            const float* p = logit.data<float>();
            const int label = st.output.labels[c];
            withPixelType(out.pixelType(), [&](auto tag) {
                using T = decltype(tag);
                T* dst = out.data<T>();
                for (int64_t i = 0, n = og.voxelCount(); i < n; ++i)
                    if (p[i] > 0.0f) dst[i] = static_cast<T>(label);
            });
        }
        return out;
    }
    ExportSpec exp;
    exp.threads = threads;
    exp.channel_labels = st.channelLabelValues();
    if (st.output.kind == StageOutputKind::kSoftmax) {
        exp.activation = OutputActivation::kSoftmax;
        exp.round_to_half = st.inference.accumulation == engine::Accumulation::kNnUNetFp16;
        return scoresToLabelMap(scores, record, exp);
    }
    exp.activation = OutputActivation::kSigmoid;
    if (st.output.kind == StageOutputKind::kSigmoid) {
        exp.threshold = std::log(st.output.threshold / (1.0 - st.output.threshold));
        return scoresToLabelMap(scores, record, exp);
    }
    // One probability channel, thresholded.
    const int64_t vox = scores.numel() / scores.dim(0);
    engine::Tensor one(engine::DType::kFloat32, {1, scores.dim(1), scores.dim(2), scores.dim(3)});
    std::memcpy(one.data<float>(), scores.data<float>() + st.output.channel * vox,
                sizeof(float) * static_cast<size_t>(vox));
    exp.threshold = st.output.threshold;
    return scoresToLabelMap(one, record, exp);
}

// Paints the nonzero voxels of `part` into `into` (same grid).
void paintLabels(Volume& into, const Volume& part) {
    withPixelType(into.pixelType(), [&](auto to) {
        using T = decltype(to);
        T* dst = into.data<T>();
        withPixelType(part.pixelType(), [&](auto from) {
            using U = decltype(from);
            const U* src = part.data<U>();
            for (int64_t i = 0, n = into.geometry().voxelCount(); i < n; ++i)
                if (src[i] != U(0)) dst[i] = static_cast<T>(src[i]);
        });
    });
}

}  // namespace

bool cropLinkActive(const engine::CropLink& link, const std::vector<int>& labels) {
    return link.rule != engine::CropRule::kRoiSubset || !labels.empty();
}

std::vector<bool> stagesNeeded(const engine::ModelPackage& package,
                               const std::vector<int>& labels) {
    const size_t n = package.stages.size();
    std::vector<bool> needed(n, false);
    for (size_t s = 0; s < n; ++s) {
        const StageSpec& st = package.stages[s];
        if (!st.result) continue;
        bool wanted = labels.empty();
        for (int v : st.output.labels)
            wanted |= std::find(labels.begin(), labels.end(), v) != labels.end();
        needed[s] = wanted;
    }
    for (size_t s = n; s-- > 0;) {  // links point to earlier stages only
        if (!needed[s]) continue;
        const StageSpec& st = package.stages[s];
        if (st.crop_to && cropLinkActive(*st.crop_to, labels))
            needed[static_cast<size_t>(st.crop_to->stage_index)] = true;
        if (st.one_hot_from) needed[static_cast<size_t>(st.one_hot_from->stage_index)] = true;
        if (st.mask) needed[static_cast<size_t>(st.mask->stage_index)] = true;
        if (st.normalization.percentiles_of_stage >= 0)
            needed[static_cast<size_t>(st.normalization.percentiles_of_stage)] = true;
    }
    return needed;
}

Result<std::unique_ptr<StageRunner>> StageRunner::create(engine::Backend& backend,
                                                         const engine::LoadedModel& model,
                                                         int batch,
                                                         const engine::CompileOptions& compile,
                                                         const std::vector<int>& labels,
                                                         NetworkResidency residency) {
    if (!model.package.hasStages())
        return invalidArgument("model " + model.package.name + " has no stages");
    if (compile.quantization) VOXSEG_RETURN_IF_ERROR(checkStageQuantizationKeys(model.package));
    std::unique_ptr<StageRunner> runner(new StageRunner());
    runner->package_ = model.package;
    runner->needed_ = stagesNeeded(model.package, labels);
    runner->labels_ = labels;
    runner->backend_ = &backend;
    runner->batch_ = batch;
    runner->compile_ = compile;
    runner->residency_ = residency;
    runner->windows_.resize(model.package.stages.size());
    for (size_t s = 0; s < model.package.stages.size(); ++s) {
        if (!runner->needed_[s]) {
            log::info(kComponent, "stage {} is not needed for the labels asked for: not run",
                      model.package.stages[s].name);
            continue;
        }
        if (residency == NetworkResidency::kOneAtATime) continue;  // compiled by run()
        VOXSEG_ASSIGN_OR_RETURN(runner->windows_[s], runner->compileStage(s, model.graphs.at(s)));
    }
    return runner;
}

Result<std::unique_ptr<engine::VolumeInference>> StageRunner::compileStage(
    size_t s, const engine::Graph& graph) {
    const StageSpec& st = package_.stages[s];
    // The stage's own part of an observer and of an int8 record (stage_quantization.h).
    const engine::CompileOptions stage_compile = stageCompileOptions(compile_, st.name);
    if (!st.inference.output_size.empty()) {  // a 'valid' network, tiled as DeepVoxNet does
        auto tiles =
            ValidTiles::create(*backend_, graph, st.inputChannels(package_.channels.size()),
                               st.patch_size, st.inference.output_size, stage_compile);
        if (!tiles.isOk())
            return tiles.status().withContext("model " + package_.name + ", stage " + st.name +
                                              ": ");
        return std::unique_ptr<engine::VolumeInference>(std::move(tiles).value());
    }
    return engine::createStageWindow(*backend_, package_, graph, s, batch_, stage_compile);
}

Status StageRunner::ensureWindow(size_t s) {
    if (windows_[s]) return Status::ok();
    VOXSEG_ASSIGN_OR_RETURN(const engine::Graph graph, engine::loadStageGraph(package_, s));
    VOXSEG_ASSIGN_OR_RETURN(windows_[s], compileStage(s, graph));
    log::debug(kComponent, "stage {}: network compiled for this stage only",
               package_.stages[s].name);
    return Status::ok();
}

// Stage s's network input: the oriented image cropped to `region` and brought to the network
// grid (nnU-Net normalises before its spline resampling, deepbet and MONAI after), the
// percentiles this stage provides to itself and later stages (into `percentiles`), and nnU-Net's
// cascade one-hot channels from an earlier stage's labels on the oriented grid.
// With a mask (stages[i].mask) the tensor is the mask's box of the network grid only.
struct StageInput {
    engine::Tensor tensor;
    std::array<int64_t, 3> size{};  // the network grid
    Geometry net_grid;
    std::optional<CropBox> mask_box;  // in the network grid
    bool mask_empty = false;          // the mask has no voxel: nothing to run
};

Result<StageInput> stageInput(const engine::ModelPackage& m, size_t s, const Volume& oriented,
                              const CropBox& region, const std::vector<Volume>& oriented_labels,
                              const std::vector<Volume>& mask_labels,
                              std::vector<std::optional<std::array<double, 2>>>& percentiles,
                              int threads) {
    const StageSpec& st = m.stages[s];
    const size_t n = m.stages.size();
    StageInput in;
    VOXSEG_ASSIGN_OR_RETURN(Volume cropped, crop(oriented, region));
    const Geometry cropped_grid = cropped.geometry();
    in.size = networkSize(st, cropped_grid, m.axis_order);
    const std::array<int64_t, 3>& size = in.size;
    Volume net;
    bool normalized = false;
    if (st.grid == engine::StageGrid::kMonai) {
        const std::array<double, 3> mm{st.spacing_mm[0], st.spacing_mm[1], st.spacing_mm[2]};
        VOXSEG_ASSIGN_OR_RETURN(
            net, monaiResampleLinear(
                     cropped, monaiSpacingGeometry(cropped_grid, toIndexOrder(mm, m.axis_order))));
    } else if (st.normalize_first && st.interpolation != Interpolation::kSpline3) {
        // pyliverlesionseg's lesion input: clip and scale on the input grid, then resample
        VOXSEG_ASSIGN_OR_RETURN(cropped, normalize(cropped, st.normalization));
        normalized = true;
        VOXSEG_ASSIGN_OR_RETURN(net, resizeImage(cropped, size, st.interpolation, threads));
    } else if (st.shape.empty() && st.interpolation == Interpolation::kSpline3) {
        // nnU-Net's rules (anisotropic axis with order 0), and its order: normalised on the
        // input grid, then resampled (a clip does not commute with the spline). deepbet and
        // MONAI normalise the network-grid image (below).
        if (st.normalization.scheme != engine::Normalization::Scheme::kPercentile) {
            VOXSEG_ASSIGN_OR_RETURN(cropped, normalize(cropped, st.normalization));
            normalized = true;
        }
        VOXSEG_ASSIGN_OR_RETURN(net, resampleToGrid(cropped, resampledGeometry(cropped_grid, size),
                                                    ResampleKind::kImage, {}, threads));
    } else {
        VOXSEG_ASSIGN_OR_RETURN(net, resizeImage(cropped, size, st.interpolation, threads));
    }
    cropped = Volume();
    in.net_grid = net.geometry();
    const Geometry& net_grid = in.net_grid;

    // Percentiles this stage's input provides (to itself or to later stages).
    for (size_t t = s; t < n; ++t) {
        const auto& nt = m.stages[t].normalization;
        if (nt.scheme != engine::Normalization::Scheme::kPercentile) continue;
        const bool own = t == s && nt.percentiles_of_stage < 0;
        if (own || nt.percentiles_of_stage == static_cast<int>(s)) {
            VOXSEG_ASSIGN_OR_RETURN(percentiles[t],
                                    percentileValues(net, nt.percentile_low, nt.percentile_high));
        }
    }
    if (!normalized) {
        VOXSEG_ASSIGN_OR_RETURN(net, normalize(net, st.normalization, nullptr,
                                               percentiles[s] ? &*percentiles[s] : nullptr));
    }
    if (st.mask) {  // pyliverlesionseg's lesion input: the (dilated) liver only
        VOXSEG_ASSIGN_OR_RETURN(
            Volume mask, stageMask(mask_labels[static_cast<size_t>(st.mask->stage_index)], region,
                                   net_grid, *st.mask));
        in.mask_box = maskBox(mask);
        if (!in.mask_box) {
            in.mask_empty = true;
            return in;
        }
        VOXSEG_ASSIGN_OR_RETURN(net, maskedImage(net, mask, *in.mask_box, st.mask->outside));
    }
    std::vector<Volume> channels{std::move(net)};
    if (st.one_hot_from) {  // nnU-Net's cascade: appended after the image channels
        VOXSEG_ASSIGN_OR_RETURN(
            Volume prev,
            crop(oriented_labels[static_cast<size_t>(st.one_hot_from->stage_index)], region));
        const int axis = st.interpolation == Interpolation::kNearestExact
                             ? -1
                             : separateAxis(prev.geometry().spacing, net_grid.spacing);
        Volume on_net;
        if (st.interpolation == Interpolation::kNearestExact) {
            VOXSEG_ASSIGN_OR_RETURN(on_net, resizeNearestExact(prev, size));
        } else {
            VOXSEG_ASSIGN_OR_RETURN(on_net, resampleSegmentation(prev, size, axis));
        }
        for (Volume& c : oneHotChannels(on_net, st.one_hot_from->labels))
            channels.push_back(std::move(c));
    }
    VOXSEG_ASSIGN_OR_RETURN(in.tensor, volumesToTensor(channels, m.axis_order));
    return in;
}

Result<std::optional<Volume>> StageRunner::networkStage(
    size_t s, const Volume& oriented, const CropBox& region,
    const std::vector<Volume>& oriented_labels, const std::vector<Volume>& mask_labels,
    std::vector<std::optional<std::array<double, 2>>>& percentiles, int threads,
    const Progress& progress, bool keep_net_labels, bool want_oriented, StageTrace& trace,
    Volume& net_labels, int64_t& patches) {
    const engine::ModelPackage& m = package_;
    const StageSpec& st = m.stages[s];
    VOXSEG_ASSIGN_OR_RETURN(StageInput in, stageInput(m, s, oriented, region, oriented_labels,
                                                      mask_labels, percentiles, threads));
    trace.network = in.size;
    trace.percentiles = percentiles[s];
    if (in.mask_empty) {  // the linked label vanished on this grid: no voxel to segment
        log::warning(kComponent, "stage {}: its mask (stage {} label {}) is empty on its grid",
                     st.name, st.mask->stage, st.mask->label);
        const bool small = maxLabel(st.output.labels) <= 255;
        auto zeros = [small](const Geometry& g) {
            return small ? Volume::allocate<uint8_t>(g) : Volume::allocate<uint16_t>(g);
        };
        if (keep_net_labels) net_labels = zeros(in.net_grid);
        if (!want_oriented) return std::optional<Volume>();
        return std::optional<Volume>(zeros(oriented.geometry()));
    }
    engine::SlidingWindowStats stats;
    VOXSEG_ASSIGN_OR_RETURN(engine::Tensor scores, windows_[s]->run(in.tensor, progress, &stats));
    in.tensor = engine::Tensor();
    // The network's activations are not needed for the labels: their pages back before the
    // scores are turned into labels and resampled.
    windows_[s]->releaseWorkspace();
    if (in.mask_box) {  // back onto the whole network grid, background outside the box
        VOXSEG_ASSIGN_OR_RETURN(
            scores, pasteScores(scores, croppedGeometry(in.net_grid, *in.mask_box), in.net_grid,
                                *in.mask_box, m.axis_order, backgroundScores(st)));
    }
    trace.patches = stats.patches;
    patches += stats.patches;
    // An nnunet-fp16 window gives float16 scores: a softmax stage exports them as they are
    // (as nnU-Net resamples its float16 logits); everything else reads float32.
    const bool half = scores.dtype() == engine::DType::kFloat16;
    if (half && st.output.kind != StageOutputKind::kSoftmax)
        scores = engine::scoresAsFloat32(scores);
    VOXSEG_ASSIGN_OR_RETURN(auto values, stageLabels(scores, st));
    if (keep_net_labels) {
        VOXSEG_ASSIGN_OR_RETURN(Volume lab, labelsToVolume(values, in.net_grid, m.axis_order,
                                                           maxLabel(st.output.labels)));
        VOXSEG_RETURN_IF_ERROR(runPostprocess(lab, st));
        trace.label_voxels = countNonzero(lab);
        net_labels = std::move(lab);
    }
    if (!want_oriented) return std::optional<Volume>();
    VOXSEG_ASSIGN_OR_RETURN(
        Volume on_og, labelsOnOriented(scores, values, st, region, oriented.geometry(), in.net_grid,
                                       m.axis_order, threads));
    return std::optional<Volume>(std::move(on_og));
}

Result<Volume> StageRunner::totalSegmentatorStage(size_t s, const Volume& oriented,
                                                  const CropBox& region, int threads,
                                                  const Progress& progress, StageTrace& trace,
                                                  StagesResult& result) {
    const engine::ModelPackage& m = package_;
    const StageSpec& st = m.stages[s];
    const Geometry og = oriented.geometry();
    Volume cropped = oriented;
    if (!region.covers(og)) {
        VOXSEG_ASSIGN_OR_RETURN(cropped, crop(oriented, region));
    }
    const std::array<double, 3> mm{st.spacing_mm[0], st.spacing_mm[1], st.spacing_mm[2]};
    const Vec3 target = toIndexOrder(mm, m.axis_order);
    const int top = maxLabel(st.output.labels);
    auto predict = [&](ZoomedInput& in) -> Result<Volume> {
        engine::SlidingWindowStats stats;
        std::vector<int16_t> values;
        if (st.output.kind == StageOutputKind::kSoftmax) {
            // nnU-Net's argmax of its float16 logits (same shape: nothing to resample), taken
            // by the window as regions of the sums become final (VolumeInference::runLabels).
            const std::vector<int> channel_values = st.channelLabelValues();
            VOXSEG_ASSIGN_OR_RETURN(
                values, windows_[s]->runLabels(in.tensor, channel_values, progress, &stats));
        } else {
            VOXSEG_ASSIGN_OR_RETURN(engine::Tensor scores,
                                    windows_[s]->run(in.tensor, progress, &stats));
            VOXSEG_ASSIGN_OR_RETURN(values, stageLabels(scores, st));
        }
        in.tensor = engine::Tensor();
        windows_[s]->releaseWorkspace();  // activations back before the labels are resampled
        trace.patches += stats.patches;
        result.patches += stats.patches;
        return labelsToVolume(values, in.network, m.axis_order, top);
    };
    TotalSegmentatorTrace tt;
    tt.keep_grids = st.statistics_on_stage_grid;
    if (st.postprocess.on_stage_grid)  // TotalSegmentator's body task
        tt.postprocess = [&st](Volume& zoomed_labels) {
            return postprocessStage(zoomed_labels, st);
        };
    VOXSEG_ASSIGN_OR_RETURN(
        Volume back,
        totalSegmentatorLabels(cropped, {target[0], target[1], target[2]}, st.normalization,
                               m.axis_order, st.slabs, threads, predict, &tt));
    trace.network = tt.zoomed;
    if (tt.keep_grids) {
        result.statistics_image = std::move(tt.zoomed_image);
        result.statistics_labels = std::move(tt.zoomed_labels);
    }
    if (tt.slabs > 1)
        log::info(kComponent,
                  "stage {}: {}x{}x{} voxels at {} mm, split into {} slabs as TotalSegmentator "
                  "does",
                  st.name, tt.zoomed[0], tt.zoomed[1], tt.zoomed[2], st.spacing_mm[0], tt.slabs);
    if (region.covers(og)) return back;
    return paste(back, og, region, 0.0);
}

namespace {

// The region of the oriented grid `og` a crop link gives its stage, from its source stage's
// labels (`oriented`: on the oriented grid; `net` on `region`, its network grid); nullopt when
// they hold none of what the link looks for, which `what` then names. `asked`: --labels.
std::optional<CropBox> linkedRegion(const engine::CropLink& link, const std::vector<int>& asked,
                                    const Volume& oriented, const Volume& net,
                                    const CropBox& region, const Geometry& og, std::string& what) {
    switch (link.rule) {
        case engine::CropRule::kRoiSubset:
            what = "any of the labels asked for (--labels)";
            return roiSubsetBox(oriented, asked, link.margin_mm);
        case engine::CropRule::kLabelSet:
            what = "its crop labels (" + fmt::format("{}", fmt::join(link.labels, ", ")) + ")";
            return roiSubsetBox(oriented, link.labels, link.margin_mm);
        case engine::CropRule::kLabelBox:
            what = "label " + std::to_string(link.label);
            return linkBox(net, region, og, link);
    }
    return std::nullopt;
}

}  // namespace

Result<StagesResult> StageRunner::run(const Volume& input, int threads, const Progress& progress) {
    const engine::ModelPackage& m = package_;
    if (input.empty()) return invalidArgument("staged model: empty input");
    StagesResult result;
    AxisMapping mapping;
    VOXSEG_ASSIGN_OR_RETURN(Volume oriented, reorient(input, m.orientation, &mapping));
    const Geometry og = oriented.geometry();
    const Geometry original = input.geometry();
    const size_t n = m.stages.size();
    // What later stages read: crop links the labels on the stage's network grid (post-processed,
    // as deepbet reads its 128^3 mask), one-hot links the labels on the oriented grid.
    // A roi_subset crop link reads the labels on the oriented grid too.
    std::vector<bool> crop_source(n, false), one_hot_source(n, false), ran(n, false);
    std::vector<bool> mask_source(n, false);
    for (size_t s = 0; s < n; ++s) {
        if (!needed_[s]) continue;
        const StageSpec& st = m.stages[s];
        if (st.crop_to && cropLinkActive(*st.crop_to, labels_)) {
            const auto from = static_cast<size_t>(st.crop_to->stage_index);
            (st.crop_to->rule == engine::CropRule::kLabelBox ? crop_source : one_hot_source)[from] =
                true;
        }
        if (st.one_hot_from)
            one_hot_source[static_cast<size_t>(st.one_hot_from->stage_index)] = true;
        if (st.mask) mask_source[static_cast<size_t>(st.mask->stage_index)] = true;
    }
    // mask links read the labels on the oriented grid after post-processing
    std::vector<Volume> net_labels(n), oriented_labels(n), mask_labels(n);
    std::vector<CropBox> regions(n);  // in the oriented grid
    std::vector<std::optional<std::array<double, 2>>> percentiles(n);
    std::vector<int> all_labels;
    for (const auto& l : m.labels) all_labels.push_back(l.value);
    const int max_label = maxLabel(all_labels);
    // The result on the input grid, made when the first result stage paints into it (or at the
    // end): not resident while the networks run (78 MB for a 512 x 512 x 300 CT).
    auto labelMap = [&]() -> Volume& {
        if (result.label_map.empty())
            result.label_map = max_label <= 255 ? Volume::allocate<uint8_t>(original)
                                                : Volume::allocate<uint16_t>(original);
        return result.label_map;
    };
    bool any_result = false;

    for (size_t s = 0; s < n; ++s) {
        if (!needed_[s]) continue;
        const auto t0 = std::chrono::steady_clock::now();
        const StageSpec& st = m.stages[s];
        const Progress sp =
            progress.sub(static_cast<double>(s) / n, static_cast<double>(s + 1) / n);
        VOXSEG_RETURN_IF_ERROR(sp.checkCancelled());
        // A stage whose link source did not run (it found nothing) does not run either.
        const bool crop_on = st.crop_to && cropLinkActive(*st.crop_to, labels_);
        const int src_crop = crop_on ? st.crop_to->stage_index : -1;
        const int src_hot = st.one_hot_from ? st.one_hot_from->stage_index : -1;
        const int src_pct = st.normalization.percentiles_of_stage;
        const int src_mask = st.mask ? st.mask->stage_index : -1;
        if ((src_mask >= 0 && !ran[static_cast<size_t>(src_mask)]) ||
            (src_crop >= 0 && !ran[static_cast<size_t>(src_crop)]) ||
            (src_hot >= 0 && !ran[static_cast<size_t>(src_hot)]) ||
            (src_pct >= 0 && !ran[static_cast<size_t>(src_pct)]))
            continue;
        StageTrace trace;
        trace.name = st.name;
        CropBox region;
        region.size = og.size;
        if (crop_on) {
            const engine::CropLink& link = *st.crop_to;
            const auto from = static_cast<size_t>(link.stage_index);
            std::string what;
            const std::optional<CropBox> box = linkedRegion(
                link, labels_, oriented_labels[from], net_labels[from], regions[from], og, what);
            if (!box) {
                const std::string why = "stage " + st.name + ": stage " + link.stage +
                                        " found no voxels of " + what +
                                        " (nothing to crop to); its labels are empty. Is the "
                                        "input the kind of image model " +
                                        m.name + " expects?";
                result.warnings.push_back(why);
                log::warning(kComponent, "{}", why);
                continue;
            }
            region = *box;
        }
        regions[s] = region;
        trace.region = region;
        // The stage's labels on the oriented grid, when a result or a link needs them there.
        std::optional<Volume> on_og;
        VOXSEG_RETURN_IF_ERROR(ensureWindow(s));
        if (st.grid == engine::StageGrid::kTotalSegmentator) {
            if (crop_source[s])
                return invalidArgument("stage " + st.name +
                                       ": a label_box crop link cannot read a totalsegmentator "
                                       "stage (use rule roi_subset)");
            VOXSEG_ASSIGN_OR_RETURN(
                on_og, totalSegmentatorStage(s, oriented, region, threads, sp, trace, result));
        } else {
            VOXSEG_ASSIGN_OR_RETURN(
                on_og, networkStage(s, oriented, region, oriented_labels, mask_labels, percentiles,
                                    threads, sp, crop_source[s],
                                    st.result || one_hot_source[s] || mask_source[s], trace,
                                    net_labels[s], result.patches));
        }
        ran[s] = true;
        if (on_og) {
            if (one_hot_source[s]) oriented_labels[s] = st.result ? cloneVolume(*on_og) : *on_og;
            if (mask_source[s]) {
                mask_labels[s] = cloneVolume(*on_og);
                VOXSEG_RETURN_IF_ERROR(runPostprocess(mask_labels[s], st));
            }
            if (st.result) {
                Volume out =
                    mapping.isIdentity() ? *on_og : applyAxisMapping(*on_og, mapping.inverse());
                Volume::applyGeometry(original, *out.base());
                VOXSEG_RETURN_IF_ERROR(runPostprocess(out, st));
                trace.label_voxels = countNonzero(out);
                paintLabels(labelMap(), out);
                any_result = true;
            } else if (!crop_source[s]) {
                trace.label_voxels = countNonzero(*on_og);
            }
        }
        // The next stage's network needs its own activations: give this one's back
        // (TotalSegmentator's five 128^3 part models would otherwise keep five workspaces
        // resident), and with one network at a time the network itself.
        if (residency_ == NetworkResidency::kOneAtATime)
            windows_[s].reset();
        else
            windows_[s]->releaseWorkspace();
        trace.seconds = secondsSince(t0);
        result.stages.push_back(trace);
        log::debug(kComponent, "stage {}: region {}x{}x{} -> network {}x{}x{}, {} voxels labelled",
                   st.name, region.size[0], region.size[1], region.size[2], trace.network[0],
                   trace.network[1], trace.network[2], trace.label_voxels);
    }
    // No result stage ran (a link found nothing): an all-background result, with the warnings.
    labelMap();
    result.empty = !any_result;
    progress.report(1.0, "stages done");
    return result;
}

std::vector<Measurement> computeMeasurements(const engine::ModelPackage& package,
                                             const Volume& label_map) {
    std::vector<Measurement> out;
    if (package.measurements.empty() || label_map.empty()) return out;
    const Geometry g = label_map.geometry();
    const double voxel_ml = g.spacing[0] * g.spacing[1] * g.spacing[2] / 1000.0;
    for (const auto& spec : package.measurements) {
        int64_t voxels = 0;
        withPixelType(label_map.pixelType(), [&](auto tag) {
            using T = decltype(tag);
            const T* p = label_map.data<T>();
            for (int64_t i = 0, n = g.voxelCount(); i < n; ++i)
                if (p[i] != T(0) && std::find(spec.labels.begin(), spec.labels.end(),
                                              static_cast<int>(p[i])) != spec.labels.end())
                    ++voxels;
        });
        out.push_back({spec.name, static_cast<double>(voxels) * voxel_ml, "mL", spec.description});
    }
    return out;
}

}  // namespace voxseg::pipeline
