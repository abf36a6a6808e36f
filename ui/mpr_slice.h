// Multi-planar slices of a Volume for the viewer, as plain functions (no widgets, no Qt), so
// they are tested and benchmarked on their own.
//
// A SliceFrame says how an axial, coronal or sagittal view walks the volume's index grid: which
// index axis runs along the screen's x and y, whether it is flipped, and which one is the
// through-plane axis. Views are in radiological convention whatever the stored orientation:
// axial and coronal show the patient's right on the screen's left; axial has anterior at the
// top, coronal and sagittal superior at the top, sagittal anterior on the left. The mapping comes
// from the volume's direction cosines (LPS): each index axis is matched to the patient axis it
// is closest to (the best of the 6 permutations), so an oblique volume is shown on its own grid
// without resampling and the orientation letters name the dominant patient direction.
//
// Rendering writes 32-bit 0xAARRGGBB pixels (QImage::Format_RGB32/ARGB32 layout). Slices are
// read straight from the volume's buffer (no copy of the volume). Thread safety: reentrant;
// concurrent reads of one Volume are safe. Units: spacing in mm, intensities as stored in the
// Volume (HU for CT).
#pragma once

#include "core/geometry.h"
#include "core/volume.h"
#include "ui/index_box.h"

#include <array>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace voxseg::ui {

enum class ViewAxis { kAxial = 0, kCoronal = 1, kSagittal = 2 };
const char* viewAxisName(ViewAxis axis);  // "axial", "coronal", "sagittal"

struct SliceFrame {
    ViewAxis view = ViewAxis::kAxial;
    int axis_x = 0;       // index axis (0=i, 1=j, 2=k) along the screen's x (columns)
    int axis_y = 1;       // index axis along the screen's y (rows, downwards)
    int axis_n = 2;       // through-plane index axis (the slice number walks it)
    bool flip_x = false;  // screen column c is index (width-1-c) along axis_x
    bool flip_y = false;
    int64_t width = 0, height = 0, depth = 0;                  // columns, rows, slices
    double spacing_x = 1.0, spacing_y = 1.0, spacing_n = 1.0;  // mm
    // Patient direction letters at the screen's left, right, top and bottom edges ("R", "L", ...).
    std::array<char, 4> letters{'?', '?', '?', '?'};

    // Voxel index (i, j, k) of screen pixel (column, row) on `slice`.
    std::array<int64_t, 3> voxel(int64_t column, int64_t row, int64_t slice) const;
    // Screen (column, row, slice) of a voxel index.
    std::array<int64_t, 3> screen(const std::array<int64_t, 3>& voxel) const;
};

// Index axis (0..2) matched to each patient axis (L, P, S): the permutation whose direction
// cosines are largest in absolute value.
std::array<int, 3> indexAxisOfPatientAxes(const Geometry& geometry);
SliceFrame makeSliceFrame(const Geometry& geometry, ViewAxis view);

// Window / level in the volume's units (HU for CT). width > 0.
struct WindowLevel {
    double width = 400.0;
    double level = 40.0;
};

struct WindowPreset {
    const char* name;
    WindowLevel window;
};
// CT brain (80/40), lung (1500/-600), abdomen (400/40), bone (1800/400).
const std::vector<WindowPreset>& ctWindowPresets();
// A window from the 0.5 and 99.5 percentiles of (a sample of) the voxels: the MR default.
WindowLevel autoWindow(const Volume& volume);
// CT abdomen for CT, else autoWindow().
WindowLevel defaultWindow(const Volume& volume);

// Stored values of one slice as double, row-major (height x width); for tests and tools.
std::vector<double> extractSlice(const Volume& volume, const SliceFrame& frame, int64_t slice);

// Grey value 0..255 of `value` under `window` (linear ramp, clamped).
uint8_t windowGrey(double value, const WindowLevel& window);

// Renders one slice with the window into `argb` (width*height opaque grey pixels, row-major).
// Integer volumes of up to 16 bits go through a lookup table.
void renderSlice(const Volume& volume, const SliceFrame& frame, int64_t slice,
                 const WindowLevel& window, uint32_t* argb);

// Slices of the view whose slices cut across the stored rows (sagittal of an axial stack) in
// blocks of kSlices consecutive slices, copied slice-major in one pass: the strided read touches
// each cache line once per block instead of once per slice, so scrolling reads contiguous
// memory for kSlices - 1 of kSlices steps. The neighbouring block in the scroll direction is
// built on a background thread meanwhile, so crossing into it costs no build on the GUI thread.
// Memory: two blocks of kSlices slices (2 x 16 MB for a 512x500 int16 sagittal slice). Not
// thread-safe (one per view, GUI thread); the background build reads its own Volume handle.
class SlabCache {
  public:
    static constexpr int64_t kSlices = 32;
    SlabCache() = default;
    SlabCache(const SlabCache&) = delete;
    SlabCache& operator=(const SlabCache&) = delete;
    ~SlabCache() { clear(); }
    // Renders like renderSlice(); through the block when frame.axis_n == 0, else directly.
    void render(const Volume& volume, const SliceFrame& frame, int64_t slice,
                const WindowLevel& window, uint32_t* argb);
    void clear();
    size_t bytes() const;
    // Blocks built on the calling thread (a block taken from the background build not counted).
    int64_t blocksBuilt() const { return blocks_built_; }
    int64_t blocksPrefetched() const { return blocks_prefetched_; }

  private:
    struct Key {
        const void* source = nullptr;
        int64_t first = -1;
        int64_t n = 0;
        ViewAxis view = ViewAxis::kAxial;
        bool operator==(const Key&) const = default;
    };
    static Key keyOf(const Volume& volume, const SliceFrame& frame, int64_t first);
    // The background build is of `key` (running, or done and not taken yet).
    bool nextIs(const Key& key) const {
        return next_key_ == key && (worker_.joinable() || !next_.empty());
    }
    void prefetch(const Volume& volume, const SliceFrame& frame, int64_t first);
    void joinPrefetch();

    Volume slab_;  // size {size[axis_x], size[axis_y], n}: slice-major copy
    Key key_;
    int64_t last_slice_ = -1;
    std::thread worker_;  // builds next_ for next_key_
    Volume next_;         // written by worker_ until it is joined
    Key next_key_;
    size_t next_bytes_ = 0;
    int64_t blocks_built_ = 0;
    int64_t blocks_prefetched_ = 0;
};

// How labels are drawn over the image.
enum class OverlayMode { kFill, kOutline };

// Display colour and opacity per label value: colours[v] = 0xAARRGGBB with A = opacity*255;
// A = 0 hides label v. Values outside the table are not drawn.
struct LabelColors {
    std::vector<uint32_t> colors;
    void set(int value, std::array<uint8_t, 3> rgb, double opacity, bool visible);
};

// A label map's nonzero runs along the lines of one index axis, for the view whose slices cut
// across the volume's contiguous rows (the sagittal view of an axial stack). Read straight from
// the volume, such a slice touches one cache line per pixel (stride of a whole row); from the
// runs it reads each line's few runs, stored one after the other. Built once per label map on a
// worker thread (prepareLabelMap). Memory: 12 bytes per run plus 8 bytes per line (lines =
// size[0] * size[line_axis]); for a segmentation that is a few MB, much less than the map.
// Thread safety: immutable after buildLabelRuns(); concurrent reads are safe.
struct LabelRuns {
    struct Run {
        int32_t begin = 0, end = 0;  // [begin, end) along run_axis
        int32_t value = 0;
    };
    int run_axis = 1;   // index axis the runs go along (1 or 2)
    int line_axis = 2;  // the other axis (not 0)
    int64_t size0 = 0;  // size of index axis 0, the slice axis of the view it serves
    // Runs of the line at (i, t) (t along line_axis): runs[offsets[t * size0 + i] ..
    // offsets[t * size0 + i + 1]), in increasing order.
    std::vector<int64_t> offsets;
    std::vector<Run> runs;
    bool empty() const { return offsets.empty(); }
    size_t bytes() const { return offsets.size() * sizeof(int64_t) + runs.size() * sizeof(Run); }
    // True when slices of `frame` can be drawn from these runs (frame.axis_n == 0 and its
    // screen x runs along run_axis).
    bool serves(const SliceFrame& frame) const;
};
// Runs along `run_axis` (1 or 2) of every line of `labels` (any integer type; others are
// truncated to int32 like the viewer does). Empty when run_axis is not 1 or 2 or a size exceeds
// int32.
LabelRuns buildLabelRuns(const Volume& labels, int run_axis);
// The run axis for `geometry`'s view whose slices walk index axis 0 (-1 when no view does,
// which makeSliceFrame never gives).
int labelRunAxis(const Geometry& geometry);

// Blends the labels of `slice` over `argb` (the rendered image slice): fill paints every labelled
// pixel at its opacity; outline draws, opaque, only the labelled pixels whose 4-neighbourhood
// holds another value (or the slice edge).
// `bounds` (optional): a box holding every nonzero voxel; only its part of the slice is read (a
// slice outside it is skipped), which gives the same pixels faster.
// `runs` (optional): buildLabelRuns() of `labels`; used instead of the volume when it serves
// `frame` (same pixels, without the strided reads).
void blendLabels(const Volume& labels, const SliceFrame& frame, int64_t slice,
                 const LabelColors& colors, OverlayMode mode, uint32_t* argb,
                 const IndexBox* bounds = nullptr, const LabelRuns* runs = nullptr);

}  // namespace voxseg::ui
