// The prompt rasterisers of an interactive (nnInteractive 2.6.0-compatible) session: how a point,
// a box or a full-image mask (scribble, lasso, initial segmentation) is written into the fp16
// prompt channels, the decay of older prompts, and the window (center, zoom-out factor) each
// prompt queues for the next prediction. Same arithmetic as nninteractive 2.6.0
// (interaction/point.py, inference_session.py's add_*_interaction and _add_patch_for_*),
// including Python's rounding (halves to even) and the fp16 conversions of torch and NumPy.
// Every write calls state.before_write(channel, region) first (undo). Qt-free; plain functions.
#pragma once

#include "core/status.h"
#include "edit/interactive/resample.h"  // roundHalfEven: Python's round()
#include "edit/interactive/session_state.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace voxseg::edit::interactive {

// fp16 (IEEE binary16 bits) from a double as torch converts it (double -> float -> half, each
// rounding to nearest even: c10::Half has no double constructor) and as NumPy converts it
// (npy_double_to_half: one rounding).
uint16_t halfFromDoubleTorch(double v);
uint16_t halfFromDoubleNumpy(double v);
float halfValue(uint16_t bits);

// A prediction window a prompt asks for: nnInteractive's new_interaction_centers /
// new_interaction_zoom_out_factors entry.
struct QueuedWindow {
    Index3 center{};
    double zoom = 1.0;
};

// ---- decay (_prepare_new_interaction_intensity, _renormalize_interactions_if_needed) ----

// The intensity the next prompt is written at: state.intensity grows by 1 / decay per prompt;
// when it passes fp16's max every channel but prev_seg is scaled by (fp16 max / 10) / intensity
// in fp16 (torch's in-place multiply: float arithmetic, one rounding) and the intensity becomes
// fp16 max / 10. Decay outside (0, 1] is kInvalidArgument.
Status prepareNewInteractionIntensity(SessionState& state, const InteractiveSpec& spec);

// ---- points (interaction/point.py with use_distance_transform=True, binarize=False) ----

// The point's structuring element: skimage's ball(radius) (x^2 + y^2 + z^2 <= r^2 on the
// (2r+1)^3 grid), its Euclidean distance transform (scipy: distance to the nearest zero voxel of
// the grid) divided by its maximum. 2.6.0 resizes the ball when 2 * radius + 1 is not an integer;
// only integer radii are supported here (kUnsupported otherwise).
struct PointKernel {
    int64_t size = 0;            // 2r + 1 per axis
    std::vector<double> values;  // size^3, C order
};
Result<PointKernel> pointKernel(double radius);

// place_point: the kernel times state.intensity (float64), converted to fp16 as torch does, is
// max-written around `center` (kernel voxel size/2 on `center`), clipped to the image. A kernel
// wholly outside the image writes nothing (2.6.0 prints and ignores it).
void placePoint(SessionState& state, int channel, Index3 center, const PointKernel& kernel);

// _add_patch_for_point_interaction: the point itself, zoom 1.
QueuedWindow windowForPoint(Index3 center);

// ---- boxes (add_bbox_interaction, _add_validated_bbox_interaction) ----

// A box as the caller gives it: [lo, hi) per axis in voxel coordinates, (z, y, x).
struct BoxRequest {
    std::array<double, 3> lo{};
    std::array<double, 3> hi{};
};

// Which prompt a box is: "bbox2d" when at least one axis has size exactly 1 and the model
// supports bbox2d, else "bbox3d"; kInvalidArgument for a zero-size axis or a reversed box, and
// kUnsupported for a 3-D box (no axis of size 1) on a model without bbox3d. The message names
// the box.
Result<std::string> boxKind(const BoxRequest& box, const InteractiveSpec& spec);

// The box 2.6.0 writes: each bound rounded (halves to even), clipped to the image, and an axis
// that collapsed grown back to one voxel (at 0: [0, 1); else its start moves down by one).
Box roundAndClipBox(const BoxRequest& box, Index3 shape);

// Writes state.intensity (fp16, torch's conversion) into `box` of `channel` (an assignment, not
// a maximum, as 2.6.0 does).
void writeBox(SessionState& state, int channel, const Box& box);

// _add_patch_for_bbox_interaction and _generic_add_patch_from_image: center = round((lo + hi) /
// 2) per axis, zoom = max(1, max over axes of (size + patch // 3) / patch).
QueuedWindow windowForRegion(const Box& region, Index3 patch);

// ---- full-image masks (scribble, lasso, initial segmentation) ----

// A mask prompt over a box of the image (2.6.0's interaction_bbox): `mask` holds the box's
// voxels, (z, y, x) C order, nonzero = drawn. A full-image mask has the box [0, shape).
struct MaskPrompt {
    Box box;
    std::vector<uint8_t> mask;
};

// The bounding box of the mask's nonzero voxels (_nonzero_spatial_bbox), or nullopt.
std::optional<Box> nonzeroBox(const uint8_t* mask, Index3 shape);
std::optional<Box> nonzeroBox(const std::vector<uint8_t>& mask, Index3 shape);

// _add_image_interaction's write: the mask (covering `mask_box` of the image) as fp16 times
// state.intensity (when it is not 1) in NumPy's float16 arithmetic (the intensity rounded once
// to fp16, the product rounded to fp16), max-written into `channel` over `region` (the mask's
// nonzero box in image coordinates, inside `mask_box`; elsewhere the mask is 0 and the maximum
// changes nothing).
void maxWriteMask(SessionState& state, int channel, const uint8_t* mask, const Box& mask_box,
                  const Box& region);

// add_initial_seg_interaction's write of the previous-segmentation channel: the mask as fp16
// (an overwrite of the whole channel).
void writeMaskChannel(SessionState& state, int channel, const std::vector<uint8_t>& mask);

}  // namespace voxseg::edit::interactive
