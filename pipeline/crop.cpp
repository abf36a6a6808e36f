#include "pipeline/crop.h"

#include "pipeline/pixel_dispatch.h"

#include <itkBinaryFillholeImageFilter.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace voxseg::pipeline {

namespace {

Status checkChannels(const std::vector<Volume>& channels) {
    if (channels.empty()) return invalidArgument("crop: no input channels");
    const Geometry g = channels[0].geometry();
    for (const Volume& c : channels) {
        if (c.empty()) return invalidArgument("crop: empty channel");
        if (!c.geometry().approxEqual(g))
            return invalidArgument(
                "crop: input channels are on different grids; resample them "
                "to one grid first",
                c.info().source);
    }
    return Status::ok();
}

Status checkBox(const Geometry& g, const CropBox& box) {
    for (int a = 0; a < 3; ++a)
        if (box.begin[a] < 0 || box.size[a] <= 0 || box.begin[a] + box.size[a] > g.size[a])
            return invalidArgument("crop box outside the volume");
    return Status::ok();
}

}  // namespace

Result<CropBox> nonzeroBox(const std::vector<Volume>& channels) {
    VOXSEG_RETURN_IF_ERROR(checkChannels(channels));
    const Geometry g = channels[0].geometry();
    std::array<int64_t, 3> lo{g.size[0], g.size[1], g.size[2]};
    std::array<int64_t, 3> hi{-1, -1, -1};
    for (const Volume& c : channels) {
        withPixelType(c.pixelType(), [&](auto tag) {
            using T = decltype(tag);
            const T* p = c.data<T>();
            for (int64_t k = 0; k < g.size[2]; ++k)
                for (int64_t j = 0; j < g.size[1]; ++j) {
                    const T* row = p + (k * g.size[1] + j) * g.size[0];
                    int64_t first = -1, last = -1;
                    for (int64_t i = 0; i < g.size[0]; ++i)
                        if (row[i] != T(0)) {
                            if (first < 0) first = i;
                            last = i;
                        }
                    if (first < 0) continue;
                    lo[0] = std::min(lo[0], first), hi[0] = std::max(hi[0], last);
                    lo[1] = std::min(lo[1], j), hi[1] = std::max(hi[1], j);
                    lo[2] = std::min(lo[2], k), hi[2] = std::max(hi[2], k);
                }
        });
    }
    CropBox box;
    if (hi[0] < 0) {
        box.size = g.size;
        return box;
    }
    for (int a = 0; a < 3; ++a) box.begin[a] = lo[a], box.size[a] = hi[a] - lo[a] + 1;
    return box;
}

Result<Volume> nonzeroMask(const std::vector<Volume>& channels) {
    VOXSEG_RETURN_IF_ERROR(checkChannels(channels));
    const Geometry g = channels[0].geometry();
    Volume mask = Volume::allocate<uint8_t>(g);
    uint8_t* m = mask.data<uint8_t>();
    for (const Volume& c : channels) {
        withPixelType(c.pixelType(), [&](auto tag) {
            using T = decltype(tag);
            const T* p = c.data<T>();
            for (int64_t i = 0, n = g.voxelCount(); i < n; ++i)
                if (p[i] != T(0)) m[i] = 1;
        });
    }
    try {
        auto fill = itk::BinaryFillholeImageFilter<Image3<uint8_t>>::New();
        fill->SetInput(mask.image<uint8_t>());
        fill->SetForegroundValue(1);
        fill->SetFullyConnected(true);
        fill->Update();
        Image3<uint8_t>::Pointer out = fill->GetOutput();
        out->DisconnectPipeline();
        return Volume::fromImage<uint8_t>(out);
    } catch (const std::exception& e) {
        return internalError(std::string("nonzero mask: hole filling failed: ") + e.what());
    }
}

Geometry croppedGeometry(const Geometry& geometry, const CropBox& box) {
    Geometry out = geometry;
    out.size = box.size;
    out.origin = geometry.indexToPhysical({static_cast<double>(box.begin[0]),
                                           static_cast<double>(box.begin[1]),
                                           static_cast<double>(box.begin[2])});
    return out;
}

Result<Volume> crop(const Volume& volume, const CropBox& box) {
    if (volume.empty()) return invalidArgument("crop: empty volume");
    const Geometry g = volume.geometry();
    VOXSEG_RETURN_IF_ERROR(checkBox(g, box));
    if (box.covers(g)) return volume;
    const Geometry out_geometry = croppedGeometry(g, box);
    return withPixelType(volume.pixelType(), [&](auto tag) -> Result<Volume> {
        using T = decltype(tag);
        Volume out = Volume::allocate<T>(out_geometry, volume.info());
        const T* src = volume.data<T>();
        T* dst = out.data<T>();
        for (int64_t k = 0; k < box.size[2]; ++k)
            for (int64_t j = 0; j < box.size[1]; ++j) {
                const T* row = src +
                               ((box.begin[2] + k) * g.size[1] + box.begin[1] + j) * g.size[0] +
                               box.begin[0];
                std::memcpy(dst + (k * box.size[1] + j) * box.size[0], row,
                            sizeof(T) * static_cast<size_t>(box.size[0]));
            }
        return out;
    });
}

Result<Volume> paste(const Volume& cropped, const Geometry& full, const CropBox& box, double fill) {
    if (cropped.empty()) return invalidArgument("paste: empty volume");
    VOXSEG_RETURN_IF_ERROR(checkBox(full, box));
    if (cropped.geometry().size != box.size)
        return invalidArgument("paste: volume size differs from the crop box");
    return withPixelType(cropped.pixelType(), [&](auto tag) -> Result<Volume> {
        using T = decltype(tag);
        Volume out = Volume::allocate<T>(full, cropped.info());
        T* dst = out.data<T>();
        if (fill != 0.0) std::fill(dst, dst + full.voxelCount(), static_cast<T>(fill));
        const T* src = cropped.data<T>();
        for (int64_t k = 0; k < box.size[2]; ++k)
            for (int64_t j = 0; j < box.size[1]; ++j)
                std::memcpy(
                    dst + ((box.begin[2] + k) * full.size[1] + box.begin[1] + j) * full.size[0] +
                        box.begin[0],
                    src + (k * box.size[1] + j) * box.size[0],
                    sizeof(T) * static_cast<size_t>(box.size[0]));
        return out;
    });
}

}  // namespace voxseg::pipeline
