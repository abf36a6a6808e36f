// scipy.ndimage.zoom(img, zoom, mode="nearest", order=0 or 1) reproduced bit for bit, as
// TotalSegmentator 2.18.0 resamples (resampling.py: change_spacing -> resample_img): the CT to
// the model's spacing with order 1 then .astype(np.int32), the predicted label map back to the
// input's shape with order 0 then .astype(np.uint8). Checked against scipy 1.17.1 by
// tests/pipeline/scipy_zoom_test.cpp (goldens: tests/pipeline/data/gen_scipy_zoom_golden.py).
//
// What scipy computes (ndimage/_interpolation.py zoom + src/ni_interpolation.c NI_ZoomShift,
// grid_mode=False), axes = the volume's index axes i, j, k:
// - Output length per axis: int(round(n * zoom)) on the float64 product, half to even.
// - Corner-aligned sampling: output index o reads input coordinate c = o * f (float64), with
//   f = (n_in - 1) / (n_out - 1), or f = 1 when n_out == 1 (so an axis of 1 voxel out reads
//   input 0, and an axis of 1 voxel in is read at 0 everywhere). The first and last voxels of
//   the two grids coincide: this is NOT the field-of-view (half-voxel) mapping of resample.h.
// - Order 1: taps floor(c) and floor(c) + 1 clamped to the axis ("nearest" beyond the edge),
//   weights w0 = 1 - (c - floor(c)), w1 = 1 - w0; per output voxel
//   t = sum over the 8 taps (i slowest, k fastest) of ((v * wi) * wj) * wk, in float64, from 0.
//   The order matters: another one changes float64 bits, and through them a few int32 voxels
//   (a sum just below an integer truncates one lower: 2-6 voxels in 2,500 with k slowest).
// - Order 0: the tap floor(c + 0.5): ties (c exactly k + 0.5) go UP to k + 1, not to even.
// Values go through float64 as TotalSegmentator's get_fdata() array does (exact for every
// PixelType); so the caller must hand in what get_fdata() gives (scl_slope/scl_inter applied).
//
// Output geometry: TotalSegmentator's new affine divides each column of the direction * spacing
// matrix by that axis's zoom and keeps the translation: spacing / zoom per axis, same origin
// (the centre of voxel 0, which the corner alignment keeps in place) and same direction. Note
// that spacing / zoom is not the grid's true sample distance (spacing * f): by the affine, the
// last voxel's centre is spacing * |n_out - n_in| / n_out mm away from where it was sampled
// (about one input voxel when halving); voxseg reproduces TotalSegmentator's affine. The zoom used
// is ZoomOptions::zoom when given (TotalSegmentator's spacing / new_spacing, where the spacing is
// the NIfTI header's float32 pixdim in float64: the output shape depends on those bits), else
// out / in per axis (change_spacing with target_shape, e.g. the label map going back).
//
// Thread safety: reentrant. `threads` = 0 uses every core; results do not depend on it (each
// voxel is computed alone, in the same order).
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"

#include <array>
#include <cstdint>
#include <optional>

namespace voxseg::pipeline {

// scipy's output shape: int(round(n * zoom)) per axis, Python's round (half to even). May be 0
// (scipy returns an empty array; zoomLinear/zoomNearest refuse it).
std::array<int64_t, 3> scipyZoomShape(const std::array<int64_t, 3>& in,
                                      const std::array<double, 3>& zoom);

// The per-axis input step scipy samples with (grid_mode=False): (in - 1) / (out - 1) in float64,
// 1 where out == 1.
std::array<double, 3> scipyZoomStep(const std::array<int64_t, 3>& in,
                                    const std::array<int64_t, 3>& out);

// TotalSegmentator's output grid for `zoom`: size scipyZoomShape(in.size, zoom), spacing
// in.spacing / zoom, origin and direction of `in`.
Geometry scipyZoomGeometry(const Geometry& in, const std::array<double, 3>& zoom);

// The pixel type zoomLinear returns: scipy's float64, or what TotalSegmentator's .astype(dtype)
// makes of it: float32 (round to nearest) or int32 (truncation toward zero; NaN and values
// outside int32 become INT32_MIN, as numpy's cast does on x86).
enum class ZoomValues { kFloat64, kFloat32, kInt32 };

struct ZoomOptions {
    // The zoom TotalSegmentator passed to ndimage.zoom; only sets the output spacing (see above).
    // Unset: out_size / in_size per axis.
    std::optional<std::array<double, 3>> zoom;
    int threads = 0;  // 0 = every core
};

// ndimage.zoom(order=1, mode="nearest") of `in` (any pixel type) to `out_size`, then `values`.
// TotalSegmentator's CT: zoomLinear(ct, scipyZoomShape(size, zoom), ZoomValues::kInt32, {zoom}).
Result<Volume> zoomLinear(const Volume& in, const std::array<int64_t, 3>& out_size,
                          ZoomValues values, const ZoomOptions& options = {});

// ndimage.zoom(order=0, mode="nearest") of `labels` to `out_size`, pixel type kept (each output
// voxel copies one input voxel; any pixel type, label maps are uint8/uint16).
// TotalSegmentator's label map back to the input: zoomNearest(pred, input_size).
Result<Volume> zoomNearest(const Volume& labels, const std::array<int64_t, 3>& out_size,
                           const ZoomOptions& options = {});

}  // namespace voxseg::pipeline
