// What an edit would change, before it is applied: the viewer draws it as an overlay while the
// reader moves the mouse or the intensity range (3D Slicer's threshold / level tracing preview),
// and says what a one-shot op removed (how many islands, how many voxels). The op runs through
// the same code LabelEditor::apply() runs, on a scratch copy of the label map, and the changed
// voxels are put back afterwards, so a preview is exactly what the commit will change and the
// editor's own map is never touched (other threads may read it meanwhile). A threshold, which
// changes each voxel on its own, is evaluated on the map directly with apply()'s test (three
// slices of a 512 x 512 x 300 map in a few ms, for a preview that follows the crosshair).
//
// EditPreviewer holds the scratch copy (one label map's worth of memory, made on the first
// preview and again after the label map changed: call invalidate()). Not thread-safe: one
// previewer per thread.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "edit/edit_op.h"

#include <array>
#include <cstdint>
#include <vector>

namespace voxseg::edit {

struct EditPreview {
    // Linear voxel indices (i + nx * (j + ny * k)) the op would change, each once, in no
    // particular order (tile by tile), with the value each would get (op.label for the adding
    // ops, 0 for erase and islands).
    std::vector<int64_t> voxels;
    std::vector<int> values;
    // Their bounding box (inclusive; lo > hi when empty).
    std::array<int64_t, 3> box_lo{0, 0, 0};
    std::array<int64_t, 3> box_hi{-1, -1, -1};
    bool empty() const { return voxels.empty(); }
};

class EditPreviewer {
  public:
    // What `op` would change in `labels` (uint8/uint16 on `image`'s grid, as LabelEditor holds
    // them). Undo/redo ops are refused. Errors are the op's own (as apply() would give them).
    Result<EditPreview> preview(const Volume& image, const Volume& labels, const EditOp& op);
    // The label map changed (an edit was applied): the next preview copies it again.
    void invalidate() { scratch_ = Volume(); }

  private:
    Volume scratch_;
    const void* source_ = nullptr;  // the map scratch_ was copied from
};

// Connected components (`connectivity` 6 or 26) of a set of voxels given as linear indices (any
// order) on a grid of `size`: how many islands an islands op removes (they are the removed
// voxels' components).
int64_t countComponents(std::vector<int64_t> voxels, const std::array<int64_t, 3>& size,
                        int connectivity = 26);

}  // namespace voxseg::edit
