#include "pipeline/mask_input.h"

#include "pipeline/pixel_dispatch.h"
#include "pipeline/resample.h"
#include "pipeline/stages.h"
#include "pipeline/tensor_layout.h"

#include <algorithm>
#include <cstring>

namespace voxseg::pipeline {

Result<Volume> dilate18(const Volume& mask, int times) {
    if (mask.empty()) return invalidArgument("dilate: empty mask");
    const Geometry g = mask.geometry();
    const auto [ni, nj, nk] = g.size;
    std::vector<uint8_t> cur(static_cast<size_t>(g.voxelCount()));
    withPixelType(mask.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        const T* p = mask.data<T>();
        for (size_t i = 0; i < cur.size(); ++i) cur[i] = p[i] != T(0) ? 1 : 0;
    });
    std::vector<uint8_t> next(cur.size());
    for (int t = 0; t < times; ++t) {
        std::fill(next.begin(), next.end(), uint8_t{0});
        for (int64_t k = 0; k < nk; ++k)
            for (int64_t j = 0; j < nj; ++j)
                for (int64_t i = 0; i < ni; ++i) {
                    if (!cur[static_cast<size_t>((k * nj + j) * ni + i)]) continue;
                    // 18-neighbourhood: offsets with at most two nonzero components
                    for (int64_t dk = -1; dk <= 1; ++dk)
                        for (int64_t dj = -1; dj <= 1; ++dj)
                            for (int64_t di = -1; di <= 1; ++di) {
                                if (di != 0 && dj != 0 && dk != 0) continue;
                                const int64_t a = i + di, b = j + dj, c = k + dk;
                                if (a < 0 || b < 0 || c < 0 || a >= ni || b >= nj || c >= nk)
                                    continue;
                                next[static_cast<size_t>((c * nj + b) * ni + a)] = 1;
                            }
                }
        cur.swap(next);
    }
    Volume out = Volume::allocateUninitialized<uint8_t>(g, mask.info());
    std::memcpy(out.data<uint8_t>(), cur.data(), cur.size());
    return out;
}

std::optional<CropBox> maskBox(const Volume& mask) {
    return boxWhere(mask, [](int64_t v) { return v != 0; });
}

Result<Volume> stageMask(const Volume& labels, const CropBox& region, const Geometry& net_grid,
                         const engine::MaskLink& link) {
    VOXSEG_ASSIGN_OR_RETURN(Volume cropped, crop(labels, region));
    Volume binary = Volume::allocate<uint8_t>(cropped.geometry());
    uint8_t* dst = binary.data<uint8_t>();
    withPixelType(cropped.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        const T* p = cropped.data<T>();
        for (int64_t i = 0, n = cropped.geometry().voxelCount(); i < n; ++i)
            dst[i] = static_cast<double>(p[i]) == link.label ? 1 : 0;
    });
    VOXSEG_ASSIGN_OR_RETURN(Volume on_net, resampleSegmentation(binary, net_grid.size, -1));
    Volume::applyGeometry(net_grid, *on_net.base());
    if (link.dilate <= 0) return on_net;
    return dilate18(on_net, link.dilate);
}

Result<Volume> maskedImage(const Volume& image, const Volume& mask, const CropBox& box,
                           double outside) {
    if (image.pixelType() != PixelType::kFloat32 || mask.pixelType() != PixelType::kUInt8 ||
        image.geometry().size != mask.geometry().size)
        return invalidArgument("mask: expected a float32 image and a uint8 mask on one grid");
    VOXSEG_ASSIGN_OR_RETURN(Volume img, crop(image, box));
    VOXSEG_ASSIGN_OR_RETURN(Volume m, crop(mask, box));
    img = cloneVolume(img);
    float* p = img.data<float>();
    const uint8_t* q = m.data<uint8_t>();
    for (int64_t i = 0, n = img.geometry().voxelCount(); i < n; ++i)
        if (!q[i]) p[i] = static_cast<float>(outside);
    return img;
}

Result<engine::Tensor> pasteScores(const engine::Tensor& scores, const Geometry& box_grid,
                                   const Geometry& full, const CropBox& box,
                                   engine::AxisOrder order, const std::vector<float>& background) {
    if (static_cast<int64_t>(background.size()) != scores.dim(0))
        return invalidArgument("mask: one background score per output channel needed");
    std::vector<Volume> channels;
    for (int64_t c = 0; c < scores.dim(0); ++c) {
        VOXSEG_ASSIGN_OR_RETURN(Volume part, tensorChannelToVolume(scores, c, box_grid, order));
        VOXSEG_ASSIGN_OR_RETURN(Volume whole,
                                paste(part, full, box, background[static_cast<size_t>(c)]));
        channels.push_back(std::move(whole));
    }
    return volumesToTensor(channels, order);
}

std::vector<float> backgroundScores(const engine::StageSpec& stage) {
    // Logits far enough from 0 that sigmoid / softmax give 0 (or 1 for background) in float32,
    // small enough that interpolating them stays finite.
    constexpr float kLow = -100.0f, kHigh = 100.0f;
    std::vector<float> b(static_cast<size_t>(stage.outputChannels()), kLow);
    if (stage.output.kind == engine::StageOutputKind::kSoftmax && !b.empty()) b[0] = kHigh;
    return b;
}

}  // namespace voxseg::pipeline
