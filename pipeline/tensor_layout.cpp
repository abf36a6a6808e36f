#include "pipeline/tensor_layout.h"

#include <cstring>

namespace voxseg::pipeline {

Vec3 toIndexOrder(const std::array<double, 3>& v, AxisOrder order) {
    return order == AxisOrder::kZyx ? Vec3{v[2], v[1], v[0]} : Vec3{v[0], v[1], v[2]};
}

std::array<double, 3> toModelOrder(const Vec3& v, AxisOrder order) {
    return order == AxisOrder::kZyx ? std::array<double, 3>{v[2], v[1], v[0]}
                                    : std::array<double, 3>{v[0], v[1], v[2]};
}

std::array<int64_t, 3> tensorDims(const Geometry& g, AxisOrder order) {
    return order == AxisOrder::kZyx ? std::array<int64_t, 3>{g.size[2], g.size[1], g.size[0]}
                                    : g.size;
}

Result<engine::Tensor> volumesToTensor(const std::vector<Volume>& channels, AxisOrder order) {
    if (channels.empty()) return invalidArgument("no input channels for the network");
    const Geometry g = channels[0].geometry();
    const auto dims = tensorDims(g, order);
    engine::Tensor tensor(engine::DType::kFloat32,
                          {static_cast<int64_t>(channels.size()), dims[0], dims[1], dims[2]});
    const int64_t n = g.voxelCount();
    float* out = tensor.data<float>();
    for (size_t c = 0; c < channels.size(); ++c) {
        const Volume& v = channels[c];
        if (v.empty() || v.geometry().size != g.size)
            return invalidArgument("network input channels must share one grid", v.info().source);
        Volume f = v.pixelType() == PixelType::kFloat32 ? v : v.castTo(PixelType::kFloat32);
        const float* src = f.data<float>();
        float* dst = out + static_cast<int64_t>(c) * n;
        if (order == AxisOrder::kZyx) {
            std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
            continue;
        }
        // xyz: dst[i][j][k] = src[k][j][i]
        const int64_t ni = g.size[0], nj = g.size[1], nk = g.size[2];
        for (int64_t k = 0; k < nk; ++k)
            for (int64_t j = 0; j < nj; ++j) {
                const float* row = src + (k * nj + j) * ni;
                for (int64_t i = 0; i < ni; ++i) dst[(i * nj + j) * nk + k] = row[i];
            }
    }
    return tensor;
}

Result<Volume> tensorChannelToVolume(const engine::Tensor& tensor, int64_t channel,
                                     const Geometry& geometry, AxisOrder order) {
    const auto dims = tensorDims(geometry, order);
    if (tensor.dtype() != engine::DType::kFloat32 || tensor.rank() != 4 ||
        tensor.dim(1) != dims[0] || tensor.dim(2) != dims[1] || tensor.dim(3) != dims[2])
        return invalidArgument("tensor " + engine::shapeToString(tensor.shape()) +
                               " does not match the grid of the volume");
    if (channel < 0 || channel >= tensor.dim(0))
        return invalidArgument("tensor channel " + std::to_string(channel) + " out of range");
    Volume out = Volume::allocate<float>(geometry);
    const int64_t n = geometry.voxelCount();
    const float* src = tensor.data<float>() + channel * n;
    float* dst = out.data<float>();
    if (order == AxisOrder::kZyx) {
        std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
        return out;
    }
    const int64_t ni = geometry.size[0], nj = geometry.size[1], nk = geometry.size[2];
    for (int64_t k = 0; k < nk; ++k)
        for (int64_t j = 0; j < nj; ++j)
            for (int64_t i = 0; i < ni; ++i)
                dst[(k * nj + j) * ni + i] = src[(i * nj + j) * nk + k];
    return out;
}

}  // namespace voxseg::pipeline
