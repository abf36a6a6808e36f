// The prediction step of an interactive (nnInteractive 2.6.0-compatible) session: one network call
// on a window around the last prompt, AutoZoom (grow the window while the prediction changes at
// its border), coarse-to-fine refinement of a zoomed-out prediction in patch-sized boxes, and
// paste-back into the previous-segmentation channel and the caller's target. Same behaviour as
// nnInteractiveInferenceSession._predict and the helpers it calls (including the fp16 storage,
// torch's interpolation arithmetic and NumPy's random box sampling), written from scratch.
// Touches only window-sized data. Qt-free.
#pragma once

#include "core/status.h"
#include "edit/interactive/session_state.h"

#include <optional>

namespace voxseg::edit::interactive {

// Runs one prediction for the prompt last queued: `center` (z, y, x) and `zoom` are that prompt's
// center and zoom-out factor (2.6.0 uses only the last queued one; points queue zoom 1, boxes and
// image prompts their requested factor). `autozoom`: grow the window while the border changes
// (2.6.0's do_autozoom). `force_full_refine`: plan refinement over the whole previous
// segmentation too (2.6.0 passes it for an initial segmentation). `forward` runs the network;
// `log` (may be null) receives every network call, the refinement boxes and the paste box.
// Calls state.before_write(channel, box) before each write into an interaction channel or the
// target (-1). Returns the region written to the target, clipped to the image
// (_clipped_last_paste_bbox), or nullopt when nothing was pasted.
Result<std::optional<Box>> predict(SessionState& state, const InteractiveSpec& spec, Index3 center,
                                   double zoom, bool autozoom, bool force_full_refine,
                                   const Forward& forward, PredictionLog* log);

}  // namespace voxseg::edit::interactive
