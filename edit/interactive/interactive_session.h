// An interactive (promptable, nnInteractive 2.6.0-compatible) segmentation session, Qt-free:
// an image normalised once, prompts (point, box, scribble, lasso, initial segmentation; include
// or exclude) written into the fp16 prompt channels, and a prediction after each prompt that
// updates the session's target mask. Each call returns only the box of the target it changed.
// Same behaviour as nnInteractiveInferenceSession 2.6.0 (set_image, add_*_interaction, undo,
// reset_interactions), written from scratch; the prediction itself is predict.h.
//
// Undo: every prompt records what it overwrote (an InteractiveDelta). undo() is 2.6.0's
// single-level undo (the last prompt only, once). The delta of the last prompt can also be taken
// by the edit library (takeLastDelta) and swapped back and forth (revert/reapply) as one
// undo/redo step among the other edit ops, as long as steps are undone and redone in order.
//
// Axes (z, y, x), voxel coordinates (voxel i has its center at i), as session_state.h.
// Not thread-safe: one caller at a time (the viewer queues prompts on one worker thread).
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "edit/interactive/draw_prompts.h"
#include "edit/interactive/prompts.h"
#include "edit/interactive/session_state.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <vector>

namespace voxseg::edit::interactive {

class InteractiveSession;

// What one prompt changed: the scalar state before it and the pre-image of every region it
// overwrote, in write order. swap() exchanges them with the session's current contents, so
// applying it twice restores the state it was taken in.
class InteractiveDelta {
  public:
    bool applied() const { return applied_; }  // true: the prompt's effect is in the session
    size_t bytes() const;

  private:
    friend class InteractiveSession;
    struct Region {
        int channel = 0;  // -1: the target
        Box box;
        std::vector<uint16_t> interactions;  // channel >= 0
        std::vector<uint8_t> target;         // channel -1
        bool zero = false;                   // the channel was all zero: nothing stored
    };
    double intensity = 1.0;
    std::vector<QueuedWindow> queue;
    std::set<int> dirty;
    std::vector<Region> regions;
    bool applied_ = true;
};

struct UndoResult {
    bool undone = false;         // false: nothing to undo (2.6.0's undo() returned False)
    std::optional<Box> changed;  // the target's changed region
};

class InteractiveSession {
  public:
    // `forward` runs the network (InteractiveModel::forward()); the spec is the model's.
    InteractiveSession(InteractiveSpec spec, Forward forward);
    // The state's write hook refers to this object: neither copied nor moved.
    InteractiveSession(const InteractiveSession&) = delete;
    InteractiveSession& operator=(const InteractiveSession&) = delete;

    const InteractiveSpec& spec() const { return spec_; }
    bool hasImage() const { return !state_.image.empty(); }
    Index3 shape() const { return state_.shape; }
    // The target mask (0/1), (z, y, x) C order; the caller copies the changed boxes from it.
    const std::vector<uint8_t>& target() const { return state_.target; }
    const SessionState& state() const { return state_; }

    // _background_set_image: channels x (z, y, x) values (x fastest), any numeric type converted
    // to float32. Statistics of channel 0 over the box of voxels nonzero in any channel: torch's
    // float32 mean and unbiased std (torch_sum.h); every voxel of every channel becomes (v - mean)
    // / std. Resets the prompts, the target and undo. kInvalidArgument: an all-zero image, a
    // constant one (std 0), a shape that does not match `channels`.
    Status setImage(const std::vector<float>& values, Index3 shape, int channels = 1);
    // The same for a one-channel volume (x fastest: index (z, y, x) is the same voxel), any pixel
    // type converted to float32 as 2.6.0 converts its array.
    Status setImage(const Volume& volume);
    // The thread count whose summation order the statistics reproduce (torch splits its float32
    // sum per thread, which changes the mean's last bits; torch_sum.h). Default 1 (serial); the
    // parity goldens ran with 2.
    void setTorchThreads(int threads) { torch_threads_ = std::max(1, threads); }

    void setAutoZoom(bool on) { autozoom_ = on; }
    // The network calls from now on (the same model compiled in another precision, say).
    void setForward(Forward forward) { forward_ = std::move(forward); }
    // np.random.seed(seed) for the refinement planning's random fallback (2.6.0 draws from
    // NumPy's global generator; parity replays seed it as the goldens did).
    void seedRandom(uint32_t seed) { state_.numpy_rng.seed(seed); }
    bool autoZoom() const { return autozoom_; }

    // The prompts. include: positive (object) or negative (background) channel. run_prediction
    // false only queues the prompt's window (2.6.0: the next prediction uses the last one).
    // Returns the target's changed box (clipped to the image), or nullopt when nothing was
    // predicted. Errors (nothing changed): no image, a prompt the model does not support, a
    // prompt outside the image, an empty mask, a wrong mask shape.
    Result<std::optional<Box>> addPoint(const Point3& point, bool include,
                                        bool run_prediction = true);
    Result<std::optional<Box>> addBox(const BoxRequest& box, bool include,
                                      bool run_prediction = true);
    // Full-image masks (shape() voxels, nonzero = drawn), as 2.6.0 takes them, or a mask over a
    // box of the image (2.6.0's interaction_bbox; the box must lie inside the image).
    Result<std::optional<Box>> addScribbleMask(const std::vector<uint8_t>& mask, bool include,
                                               bool run_prediction = true);
    Result<std::optional<Box>> addScribbleMask(const MaskPrompt& prompt, bool include,
                                               bool run_prediction = true);
    Result<std::optional<Box>> addLassoMask(const std::vector<uint8_t>& mask, bool include,
                                            bool run_prediction = true);
    Result<std::optional<Box>> addLassoMask(const MaskPrompt& prompt, bool include,
                                            bool run_prediction = true);
    // Drawn from points on one slice (draw_prompts.h; the mask covers only the drawing's box);
    // the scribble is the model's scribble_thickness wide (its largest in-plane value).
    Result<std::optional<Box>> addScribble(const std::vector<Point3>& points, bool include,
                                           bool run_prediction = true);
    Result<std::optional<Box>> addLasso(const std::vector<Point3>& points, bool include,
                                        bool run_prediction = true);
    // add_initial_seg_interaction: clears every prompt, makes `mask` the target and the
    // previous segmentation; with run_prediction the model refines it (full refinement).
    // Without, returns the whole image box (the target was overwritten).
    Result<std::optional<Box>> addInitialSegmentation(const std::vector<uint8_t>& mask,
                                                      bool run_prediction = false);

    // 2.6.0's undo(): reverts the last prompt, once.
    UndoResult undo();
    // reset_interactions(): all prompt channels and the target zeroed, intensity 1, no undo.
    // (2.6.0 keeps queued windows; so does this.)
    Status resetInteractions();

    // The last prompt's delta, for the edit library's undo/redo (2.6.0's undo() then has nothing
    // to undo). revert() undoes it, reapply() redoes it; both return the changed target box.
    std::shared_ptr<InteractiveDelta> takeLastDelta();
    Result<std::optional<Box>> revert(InteractiveDelta& delta);
    Result<std::optional<Box>> reapply(InteractiveDelta& delta);

    // The last prediction's log (network calls, refinement boxes, paste box).
    const PredictionLog& lastLog() const { return log_; }
    // Windows queued and not yet predicted (2.6.0's new_interaction_centers / zoom factors).
    const std::vector<QueuedWindow>& queued() const { return queue_; }

  private:
    Status requireImage() const;
    Status checkSupported(const std::string& interaction) const;
    Result<std::pair<int, int>> channels(const std::string& interaction) const;
    Status checkMask(const std::vector<uint8_t>& mask, const char* what) const;
    // Runs `op` as one undoable prompt (2.6.0's _undoable_interaction): a new delta records
    // every write; if `op` fails, everything it changed is rolled back and the previous delta
    // stays.
    template <typename Op>
    Result<std::optional<Box>> undoable(Op&& op);
    void record(int channel, const Box& region);
    Result<std::optional<Box>> runPrediction(bool force_full_refine);
    Result<std::optional<Box>> addMask(const std::string& interaction, const uint8_t* mask,
                                       size_t size, const Box& box, bool include,
                                       bool run_prediction);
    std::optional<Box> swap(InteractiveDelta& delta);

    InteractiveSpec spec_;
    Forward forward_;
    SessionState state_;
    bool autozoom_ = true;
    int torch_threads_ = 1;
    std::vector<QueuedWindow> queue_;
    std::set<int> dirty_;  // interaction channels that may be nonzero
    PointKernel point_kernel_;
    std::shared_ptr<InteractiveDelta> last_;  // 2.6.0's undo log
    InteractiveDelta* recording_ = nullptr;
    PredictionLog log_;
};

}  // namespace voxseg::edit::interactive
