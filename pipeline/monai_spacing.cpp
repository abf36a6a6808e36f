#include "pipeline/monai_spacing.h"

#include "engine/inference/half_kernels.h"
#include "pipeline/pixel_dispatch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::pipeline {
namespace {

// Source taps of one output index along one axis: grid_sample's bilinear weights at the
// clamped position (padding_mode "border").
struct Tap {
    int64_t i0 = 0, i1 = 0;
    double w = 0.0;  // weight of i1
};

std::vector<Tap> axisTaps(int64_t out_n, int64_t in_n, double out_spacing, double in_spacing) {
    std::vector<Tap> taps(static_cast<size_t>(out_n));
    const double ratio = out_spacing / in_spacing;
    for (int64_t d = 0; d < out_n; ++d) {
        const double p =
            std::clamp(static_cast<double>(d) * ratio, 0.0, static_cast<double>(in_n - 1));
        Tap& t = taps[static_cast<size_t>(d)];
        t.i0 = static_cast<int64_t>(std::floor(p));
        t.i1 = std::min(t.i0 + 1, in_n - 1);
        t.w = p - static_cast<double>(t.i0);
    }
    return taps;
}

std::array<std::vector<Tap>, 3> gridTaps(const Geometry& from, const Geometry& to) {
    std::array<std::vector<Tap>, 3> taps;
    for (int a = 0; a < 3; ++a)
        taps[static_cast<size_t>(a)] =
            axisTaps(to.size[a], from.size[a], to.spacing[a], from.spacing[a]);
    return taps;
}

Status checkSameFrame(const Geometry& from, const Geometry& to) {
    Geometry same = to;
    same.size = from.size;
    same.spacing = from.spacing;
    if (!same.approxEqual(from))
        return invalidArgument(
            "MONAI grid resampling: the target grid must share the source's origin and direction");
    for (int a = 0; a < 3; ++a)
        if (to.size[a] < 1 || !(to.spacing[a] > 0.0))
            return invalidArgument("MONAI grid resampling: empty target grid");
    return Status::ok();
}

// Trilinear value at output voxel (i, j, k) of a field read by at(si, sj, sk).
template <typename At>
double trilinear(const std::array<std::vector<Tap>, 3>& taps, int64_t i, int64_t j, int64_t k,
                 const At& at) {
    const Tap& ti = taps[0][static_cast<size_t>(i)];
    const Tap& tj = taps[1][static_cast<size_t>(j)];
    const Tap& tk = taps[2][static_cast<size_t>(k)];
    const double wi[2] = {1.0 - ti.w, ti.w}, wj[2] = {1.0 - tj.w, tj.w}, wk[2] = {1.0 - tk.w, tk.w};
    const int64_t si[2] = {ti.i0, ti.i1}, sj[2] = {tj.i0, tj.i1}, sk[2] = {tk.i0, tk.i1};
    double v = 0.0;
    for (int c = 0; c < 2; ++c)
        for (int b = 0; b < 2; ++b)
            for (int a = 0; a < 2; ++a) v += wi[a] * wj[b] * wk[c] * at(si[a], sj[b], sk[c]);
    return v;
}

}  // namespace

std::array<int64_t, 3> monaiSpacingSize(const Geometry& geometry, const Vec3& target_spacing) {
    std::array<int64_t, 3> size{};
    for (int a = 0; a < 3; ++a) {
        const double n =
            static_cast<double>(geometry.size[a] - 1) * geometry.spacing[a] / target_spacing[a] +
            1.0;
        size[static_cast<size_t>(a)] = std::max<int64_t>(1, std::llrint(n));  // half to even
    }
    return size;
}

Geometry monaiSpacingGeometry(const Geometry& geometry, const Vec3& target_spacing) {
    Geometry g = geometry;
    g.size = monaiSpacingSize(geometry, target_spacing);
    g.spacing = target_spacing;
    return g;
}

Result<Volume> monaiResampleLinear(const Volume& volume, const Geometry& target) {
    if (volume.empty()) return invalidArgument("MONAI grid resampling: empty volume");
    const Geometry& g = volume.geometry();
    VOXSEG_RETURN_IF_ERROR(checkSameFrame(g, target));
    const Volume f =
        volume.pixelType() == PixelType::kFloat32 ? volume : volume.castTo(PixelType::kFloat32);
    const float* src = f.data<float>();
    const int64_t ni = g.size[0], nij = g.size[0] * g.size[1];
    const auto taps = gridTaps(g, target);
    Volume out = Volume::allocateUninitialized<float>(target, volume.info());
    float* dst = out.data<float>();
    auto at = [&](int64_t i, int64_t j, int64_t k) {
        return static_cast<double>(src[k * nij + j * ni + i]);
    };
    for (int64_t k = 0; k < target.size[2]; ++k)
        for (int64_t j = 0; j < target.size[1]; ++j)
            for (int64_t i = 0; i < target.size[0]; ++i)
                *dst++ = static_cast<float>(trilinear(taps, i, j, k, at));
    return out;
}

Result<Volume> monaiSoftmaxToLabels(const engine::Tensor& scores, const Geometry& network,
                                    AxisOrder order, const Geometry& target,
                                    const std::vector<int>& channel_labels, int max_label) {
    VOXSEG_RETURN_IF_ERROR(checkSameFrame(network, target));
    const auto dims = tensorDims(network, order);
    if ((scores.dtype() != engine::DType::kFloat32 && scores.dtype() != engine::DType::kFloat16) ||
        scores.rank() != 4 || scores.dim(1) != dims[0] || scores.dim(2) != dims[1] ||
        scores.dim(3) != dims[2])
        return invalidArgument("MONAI inverse resampling: scores " +
                               engine::shapeToString(scores.shape()) +
                               " do not match the network grid");
    const int64_t channels = scores.dim(0);
    if (static_cast<int64_t>(channel_labels.size()) != channels)
        return invalidArgument("MONAI inverse resampling: " + std::to_string(channels) +
                               " score channels but " + std::to_string(channel_labels.size()) +
                               " channel labels");
    const int64_t voxels = network.voxelCount();
    // Activationsd(softmax), in float32 as torch computes it, on the network grid.
    std::vector<float> prob(static_cast<size_t>(channels * voxels));
    const float* table = engine::half::toFloatTable();
    auto logit = [&](int64_t c, int64_t v) {
        const int64_t o = c * voxels + v;
        return scores.dtype() == engine::DType::kFloat32 ? scores.data<float>()[o]
                                                         : table[scores.data<uint16_t>()[o]];
    };
    for (int64_t v = 0; v < voxels; ++v) {
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t c = 0; c < channels; ++c) top = std::max(top, logit(c, v));
        float sum = 0.0f;
        for (int64_t c = 0; c < channels; ++c) {
            const float e = std::exp(logit(c, v) - top);
            prob[static_cast<size_t>(c * voxels + v)] = e;
            sum += e;
        }
        for (int64_t c = 0; c < channels; ++c) prob[static_cast<size_t>(c * voxels + v)] /= sum;
    }
    // Tensor strides of the network grid's index axes i, j, k.
    const std::array<int64_t, 3> stride =
        order == AxisOrder::kZyx
            ? std::array<int64_t, 3>{1, network.size[0], network.size[0] * network.size[1]}
            : std::array<int64_t, 3>{network.size[1] * network.size[2], network.size[2], 1};
    const auto taps = gridTaps(network, target);
    Volume out =
        max_label <= 255 ? Volume::allocate<uint8_t>(target) : Volume::allocate<uint16_t>(target);
    return withPixelType(out.pixelType(), [&](auto tag) -> Result<Volume> {
        using T = decltype(tag);
        T* dst = out.data<T>();
        for (int64_t k = 0; k < target.size[2]; ++k)
            for (int64_t j = 0; j < target.size[1]; ++j)
                for (int64_t i = 0; i < target.size[0]; ++i, ++dst) {
                    double best = -1.0;
                    int64_t arg = 0;
                    for (int64_t c = 0; c < channels; ++c) {
                        const float* p = prob.data() + c * voxels;
                        const double v =
                            trilinear(taps, i, j, k, [&](int64_t a, int64_t b, int64_t d) {
                                return static_cast<double>(
                                    p[a * stride[0] + b * stride[1] + d * stride[2]]);
                            });
                        if (v > best) {  // the first maximum, as torch.argmax
                            best = v;
                            arg = c;
                        }
                    }
                    *dst = static_cast<T>(channel_labels[static_cast<size_t>(arg)]);
                }
        return std::move(out);
    });
}

}  // namespace voxseg::pipeline
