// Helpers for the pixel decoding tests: reading reference NIfTI volumes through ITK and
// comparing 2D slices up to the eight in-plane flips/transposes (dcm2niix reorients slices, the
// decoder does not).
#pragma once

#include "io/dicom_pixels.h"

#include <gtest/gtest.h>
#include <itkImage.h>
#include <itkImageFileReader.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::testing {

struct Slice {
    int64_t width = 0;
    int64_t height = 0;
    std::vector<int32_t> values;  // row-major, width fastest
    int32_t at(int64_t x, int64_t y) const { return values[y * width + x]; }
};

struct NiftiVolume {
    std::array<int64_t, 3> size{};
    std::vector<int32_t> values;  // x fastest
    // The 2D slice at `index` along `axis`.
    Slice slice(int axis, int64_t index) const {
        const int a = axis == 0 ? 1 : 0;
        const int b = axis == 2 ? 1 : 2;
        Slice s{size[a], size[b], std::vector<int32_t>(size[a] * size[b])};
        for (int64_t j = 0; j < size[b]; ++j)
            for (int64_t i = 0; i < size[a]; ++i) {
                std::array<int64_t, 3> p{};
                p[axis] = index;
                p[a] = i;
                p[b] = j;
                s.values[j * size[a] + i] = values[(p[2] * size[1] + p[1]) * size[0] + p[0]];
            }
        return s;
    }
};

inline NiftiVolume readNifti(const std::string& path) {
    using Image = itk::Image<int32_t, 3>;
    auto reader = itk::ImageFileReader<Image>::New();
    reader->SetFileName(path);
    reader->Update();
    Image::Pointer image = reader->GetOutput();
    const auto region = image->GetLargestPossibleRegion();
    NiftiVolume v;
    for (int d = 0; d < 3; ++d) v.size[d] = static_cast<int64_t>(region.GetSize()[d]);
    const int32_t* p = image->GetBufferPointer();
    v.values.assign(p, p + v.size[0] * v.size[1] * v.size[2]);
    return v;
}

// True when `b` equals `a` after one of the 8 flips/transposes of the plane.
inline bool equalUpToDihedral(const Slice& a, const Slice& b) {
    for (int transpose = 0; transpose < 2; ++transpose) {
        const int64_t w = transpose ? a.height : a.width;
        const int64_t h = transpose ? a.width : a.height;
        if (w != b.width || h != b.height) continue;
        for (int flip = 0; flip < 4; ++flip) {
            bool same = true;
            for (int64_t y = 0; y < h && same; ++y)
                for (int64_t x = 0; x < w && same; ++x) {
                    int64_t sx = (flip & 1) ? w - 1 - x : x;
                    int64_t sy = (flip & 2) ? h - 1 - y : y;
                    const int32_t va = transpose ? a.at(sy, sx) : a.at(sx, sy);
                    same = va == b.at(x, y);
                }
            if (same) return true;
        }
    }
    return false;
}

// The slices of a volume along one axis, with their sorted values for quick candidate checks.
struct SliceIndex {
    std::vector<Slice> slices;
    std::vector<std::vector<int32_t>> sorted;
    SliceIndex(const NiftiVolume& volume, int axis) {
        for (int64_t k = 0; k < volume.size[axis]; ++k) {
            slices.push_back(volume.slice(axis, k));
            sorted.push_back(slices.back().values);
            std::sort(sorted.back().begin(), sorted.back().end());
        }
    }
    // Index of the slice that equals `slice` up to flips/transposes, or -1.
    int64_t find(const Slice& slice) const {
        std::vector<int32_t> s = slice.values;
        std::sort(s.begin(), s.end());
        for (size_t k = 0; k < slices.size(); ++k)
            if (sorted[k] == s && equalUpToDihedral(slice, slices[k]))
                return static_cast<int64_t>(k);
        return -1;
    }
};

// Decodes every frame of a file; fails the test on error.
inline std::vector<int32_t> decodeAll(const std::string& path, io::PixelFormat* format = nullptr) {
    auto reader = io::DicomPixelReader::open(path);
    EXPECT_TRUE(reader.isOk()) << reader.status().toString();
    if (!reader.isOk()) return {};
    const io::PixelFormat f = reader->format();
    if (format) *format = f;
    std::vector<int32_t> all(static_cast<size_t>(f.pixelsPerFrame() * f.frames));
    for (int64_t i = 0; i < f.frames; ++i) {
        Status s = reader->readFrame(
            i, std::span<int32_t>(all).subspan(i * f.pixelsPerFrame(), f.pixelsPerFrame()));
        EXPECT_TRUE(s.isOk()) << s.toString();
        if (!s.isOk()) return {};
    }
    return all;
}

// Tile k (row-major) of a mosaic image made of tile x tile squares.
inline Slice mosaicTile(const std::vector<int32_t>& image, int64_t image_width, int64_t tile,
                        int64_t k) {
    const int64_t per_row = image_width / tile;
    const int64_t x0 = (k % per_row) * tile;
    const int64_t y0 = (k / per_row) * tile;
    Slice s{tile, tile, std::vector<int32_t>(tile * tile)};
    for (int64_t y = 0; y < tile; ++y)
        for (int64_t x = 0; x < tile; ++x)
            s.values[y * tile + x] = image[(y0 + y) * image_width + x0 + x];
    return s;
}

}  // namespace voxseg::testing
