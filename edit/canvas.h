// Internal to edit/: the label map as ops write it (every write records the tile it lands in
// before changing it), the image's intensities, and the grid arithmetic ops share. Not a public
// header: the viewer and the CLI use label_editor.h.
#pragma once

#include "core/geometry.h"
#include "core/volume.h"
#include "edit/edit_op.h"
#include "edit/label_editor.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

namespace voxseg::edit::detail {

// Index <-> physical arithmetic of one grid: physical = origin + M * index, M = D diag(spacing).
struct Grid {
    explicit Grid(const Geometry& g);
    Vec3 physical(double i, double j, double k) const {
        return {origin[0] + m[0] * i + m[1] * j + m[2] * k,
                origin[1] + m[3] * i + m[4] * j + m[5] * k,
                origin[2] + m[6] * i + m[7] * j + m[8] * k};
    }
    Vec3 index(const Vec3& p) const;  // continuous index
    bool contains(int64_t i, int64_t j, int64_t k) const {
        return i >= 0 && j >= 0 && k >= 0 && i < size[0] && j < size[1] && k < size[2];
    }
    int64_t linear(int64_t i, int64_t j, int64_t k) const {
        return i + size[0] * (j + size[1] * k);
    }
    // The index axis whose direction is closest to the normal of `plane` (largest |cosine|; the
    // lower axis on an exact tie).
    int sliceAxis(Plane plane) const;

    Geometry geometry;
    std::array<int64_t, 3> size;
    Vec3 spacing;
    Vec3 origin;
    Mat3 m;
    Mat3 m_inv;
};

// Reads image intensities as double, whatever the pixel type.
class Intensity {
  public:
    explicit Intensity(const Volume& image) : type_(image.pixelType()), data_(image.rawData()) {}
    double at(int64_t idx) const {
        switch (type_) {
            case PixelType::kUInt8:
                return static_cast<const uint8_t*>(data_)[idx];
            case PixelType::kInt8:
                return static_cast<const int8_t*>(data_)[idx];
            case PixelType::kUInt16:
                return static_cast<const uint16_t*>(data_)[idx];
            case PixelType::kInt16:
                return static_cast<const int16_t*>(data_)[idx];
            case PixelType::kUInt32:
                return static_cast<const uint32_t*>(data_)[idx];
            case PixelType::kInt32:
                return static_cast<const int32_t*>(data_)[idx];
            case PixelType::kFloat32:
                return static_cast<const float*>(data_)[idx];
            case PixelType::kFloat64:
                return static_cast<const double*>(data_)[idx];
        }
        return 0.0;
    }
    // min/max of an op (absent bound: unbounded).
    bool inRange(int64_t idx, const EditOp& op) const {
        if (!op.min && !op.max) return true;
        const double v = at(idx);
        return (!op.min || v >= *op.min) && (!op.max || v <= *op.max);
    }

  private:
    PixelType type_;
    const void* data_;
};

// The label map, written through set(): the first write into a tile copies the tile's voxels
// (its "before"); unchanged writes record nothing.
class Canvas {
  public:
    Canvas(const Volume& labels, std::vector<TileChange>& tiles);

    int get(int64_t idx) const { return wide_ ? u16_[idx] : u8_[idx]; }
    int get(int64_t i, int64_t j, int64_t k) const { return get(grid_linear(i, j, k)); }
    void set(int64_t i, int64_t j, int64_t k, int value) {
        const int64_t idx = grid_linear(i, j, k);
        if (get(idx) == value) return;
        touch(i, j, k);
        if (wide_)
            u16_[idx] = static_cast<uint16_t>(value);
        else
            u8_[idx] = static_cast<uint8_t>(value);
        ++changed_;
    }
    int maxLabel() const { return wide_ ? 65535 : 255; }
    int64_t changed() const { return changed_; }
    const std::array<int64_t, 3>& size() const { return size_; }

    // Copies tile `tile`'s voxels (clipped) into / from `bytes`.
    void readTile(int64_t tile, std::vector<uint8_t>& bytes) const;
    void writeTile(int64_t tile, const std::vector<uint8_t>& bytes);

  private:
    int64_t grid_linear(int64_t i, int64_t j, int64_t k) const {
        return i + size_[0] * (j + size_[1] * k);
    }
    void touch(int64_t i, int64_t j, int64_t k);
    // The voxel box of a tile: [lo, hi) per axis.
    void tileBox(int64_t tile, std::array<int64_t, 3>& lo, std::array<int64_t, 3>& hi) const;

    bool wide_ = false;
    uint8_t* u8_ = nullptr;
    uint16_t* u16_ = nullptr;
    std::array<int64_t, 3> size_{};
    std::array<int64_t, 3> tiles_{};
    std::vector<int32_t> slot_;  // per tile: index into tiles_out_, -1 when not recorded yet
    std::vector<TileChange>& tiles_out_;
    int64_t changed_ = 0;
};

// Whether an op adding `label` may change a voxel now holding `current` (overwrite policy).
inline bool mayOverwrite(const Overwrite& o, int current, int label) {
    if (current == label) return false;
    switch (o.mode) {
        case Overwrite::Mode::kAll:
            return true;
        case Overwrite::Mode::kBackground:
            return current == 0;
        case Overwrite::Mode::kLabel:
            return current == o.label;
    }
    return false;
}

// Op families; each checks its parameters against the grid and writes through `canvas`.
Status applyBrush(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas);
Status applyThreshold(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas);
Status applyFloodFill(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas);
Status applyLevelTrace(const EditOp& op, const Grid& grid, const Intensity& image, Canvas& canvas);
Status applyFillBetweenSlices(const EditOp& op, const Grid& grid, Canvas& canvas);
Status applyIslands(const EditOp& op, const Grid& grid, Canvas& canvas, std::vector<int>& created);
Status applyMorphology(const EditOp& op, const Grid& grid,
                       Canvas& canvas);  // median/open/close/margin
Status applyLogical(const EditOp& op, const Grid& grid, Canvas& canvas);

// Exact squared Euclidean distance transform (Felzenszwalb & Huttenlocher 2012), in mm^2, of a
// box of `n` voxels with `spacing`: out[v] = squared distance from v's centre to the nearest
// voxel with feature[v] set (a huge value when there is none). 1, 2 or 3 axes (n[a] == 1 skips).
void squaredDistance(const std::vector<uint8_t>& feature, const std::array<int64_t, 3>& n,
                     const Vec3& spacing, std::vector<double>& out);

}  // namespace voxseg::edit::detail
