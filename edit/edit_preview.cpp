#include "edit/edit_preview.h"

#include "edit/canvas.h"
#include "edit/label_editor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace voxseg::edit {
namespace {

Status runOp(const EditOp& op, const detail::Grid& grid, const detail::Intensity& image,
             detail::Canvas& canvas) {
    std::vector<int> created;
    switch (op.kind) {
        case OpKind::kPaint:
        case OpKind::kErase:
            return detail::applyBrush(op, grid, image, canvas);
        case OpKind::kThreshold:
            return detail::applyThreshold(op, grid, image, canvas);
        case OpKind::kFloodFill:
            return detail::applyFloodFill(op, grid, image, canvas);
        case OpKind::kLevelTrace:
            return detail::applyLevelTrace(op, grid, image, canvas);
        case OpKind::kFillBetweenSlices:
            return detail::applyFillBetweenSlices(op, grid, canvas);
        case OpKind::kIslands:
            return detail::applyIslands(op, grid, canvas, created);
        case OpKind::kMedian:
        case OpKind::kOpening:
        case OpKind::kClosing:
        case OpKind::kMargin:
            return detail::applyMorphology(op, grid, canvas);
        case OpKind::kLogical:
            return detail::applyLogical(op, grid, canvas);
        case OpKind::kUndo:
        case OpKind::kRedo:
            break;
    }
    return invalidArgument("undo and redo have no preview");
}

int voxelOf(const std::vector<uint8_t>& bytes, size_t v, bool wide) {
    if (!wide) return bytes[v];
    uint16_t x = 0;
    std::memcpy(&x, bytes.data() + 2 * v, 2);
    return x;
}

}  // namespace

Result<EditPreview> EditPreviewer::preview(const Volume& image, const Volume& labels,
                                           const EditOp& op) {
    if (image.empty() || labels.empty()) return invalidArgument("nothing to preview on");
    if (labels.pixelType() != PixelType::kUInt8 && labels.pixelType() != PixelType::kUInt16)
        return invalidArgument("the preview takes a uint8 or uint16 label map");
    if (labels.geometry().size != image.geometry().size)
        return invalidArgument("label map is not on the image's grid");
    const bool wide = labels.pixelType() == PixelType::kUInt16;
    const int max_label = wide ? 65535 : 255;
    if (op.label > max_label || op.other > max_label || op.overwrite.label > max_label)
        return invalidArgument(fmt::format("label {} does not fit the label map",
                                           std::max({op.label, op.other, op.overwrite.label})));
    if (scratch_.empty() || source_ != labels.rawData() ||
        scratch_.pixelType() != labels.pixelType() ||
        scratch_.geometry().size != labels.geometry().size) {
        scratch_ = cloneVolume(labels);
        source_ = labels.rawData();
    }
    const detail::Grid grid(image.geometry());
    const detail::Intensity intensity(image);
    std::vector<TileChange> tiles;
    detail::Canvas canvas(scratch_, tiles);
    const Status status = runOp(op, grid, intensity, canvas);
    // What changed, tile by tile; then the scratch copy is put back.
    EditPreview out;
    const auto& size = grid.size;
    std::array<int64_t, 3> ntiles{};
    for (int a = 0; a < 3; ++a) ntiles[a] = (size[a] + LabelEditor::kTile - 1) / LabelEditor::kTile;
    std::vector<uint8_t> after;
    out.box_lo = {INT64_MAX, INT64_MAX, INT64_MAX};
    for (const TileChange& t : tiles) {
        canvas.readTile(t.tile, after);
        const int64_t c[3] = {t.tile % ntiles[0], (t.tile / ntiles[0]) % ntiles[1],
                              t.tile / (ntiles[0] * ntiles[1])};
        std::array<int64_t, 3> lo{}, hi{};
        for (int a = 0; a < 3; ++a) {
            lo[a] = c[a] * LabelEditor::kTile;
            hi[a] = std::min(lo[a] + LabelEditor::kTile, size[a]);
        }
        size_t v = 0;
        for (int64_t k = lo[2]; k < hi[2]; ++k)
            for (int64_t j = lo[1]; j < hi[1]; ++j)
                for (int64_t i = lo[0]; i < hi[0]; ++i, ++v) {
                    const int now = voxelOf(after, v, wide);
                    if (now == voxelOf(t.before, v, wide)) continue;
                    out.voxels.push_back(grid.linear(i, j, k));
                    out.values.push_back(now);
                    const int64_t x[3] = {i, j, k};
                    for (int a = 0; a < 3; ++a) {
                        out.box_lo[a] = std::min(out.box_lo[a], x[a]);
                        out.box_hi[a] = std::max(out.box_hi[a], x[a]);
                    }
                }
        canvas.writeTile(t.tile, t.before);
    }
    if (!status.isOk()) return status.withContext(std::string(opName(op.kind)) + ": ");
    if (out.voxels.empty()) out.box_lo = {0, 0, 0};
    // Tiles come in the order they were first written: sort by voxel index.
    std::vector<size_t> order(out.voxels.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return out.voxels[a] < out.voxels[b]; });
    EditPreview sorted;
    sorted.box_lo = out.box_lo;
    sorted.box_hi = out.box_hi;
    sorted.voxels.reserve(order.size());
    sorted.values.reserve(order.size());
    for (size_t n : order) {
        sorted.voxels.push_back(out.voxels[n]);
        sorted.values.push_back(out.values[n]);
    }
    return sorted;
}

int64_t countComponents(const std::vector<int64_t>& voxels, const std::array<int64_t, 3>& size,
                        int connectivity) {
    if (voxels.empty()) return 0;
    // Union-find over the set's members; neighbours found by binary search (ascending input).
    std::vector<int64_t> parent(voxels.size());
    std::iota(parent.begin(), parent.end(), int64_t{0});
    auto find = [&](int64_t x) {
        while (parent[static_cast<size_t>(x)] != x) {
            parent[static_cast<size_t>(x)] =
                parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
            x = parent[static_cast<size_t>(x)];
        }
        return x;
    };
    const int64_t nx = size[0], ny = size[1], nz = size[2];
    int64_t components = static_cast<int64_t>(voxels.size());
    for (size_t n = 0; n < voxels.size(); ++n) {
        const int64_t idx = voxels[n];
        const int64_t i = idx % nx, j = (idx / nx) % ny, k = idx / (nx * ny);
        // Only the neighbours before this voxel in index order: each pair is joined once.
        for (int dz = -1; dz <= 0; ++dz)
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    if (dz == 0 && (dy > 0 || (dy == 0 && dx >= 0))) continue;
                    if (connectivity == 6 && std::abs(dx) + std::abs(dy) + std::abs(dz) != 1)
                        continue;
                    const int64_t x = i + dx, y = j + dy, z = k + dz;
                    if (x < 0 || y < 0 || z < 0 || x >= nx || y >= ny || z >= nz) continue;
                    const int64_t m = x + nx * (y + ny * z);
                    const auto it = std::lower_bound(voxels.begin(), voxels.end(), m);
                    if (it == voxels.end() || *it != m) continue;
                    const int64_t a = find(static_cast<int64_t>(n));
                    const int64_t b = find(it - voxels.begin());
                    if (a == b) continue;
                    parent[static_cast<size_t>(a)] = b;
                    --components;
                }
    }
    return components;
}

}  // namespace voxseg::edit
