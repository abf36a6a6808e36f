// The state an interactive (nnInteractive-style) segmentation session shares between its parts:
// the model's fixed settings (model.json's "interactive" section), the normalised image, the
// full-image prompt channels in fp16, the caller's target mask, and the hooks a prediction uses
// to run the network and to let undo save what it overwrites. Qt-free.
//
// Axes: (z, y, x), the order of nnInteractive's arrays. voxseg's Volume is x fastest, so index
// (z, y, x) addresses the same voxel on both sides and nnInteractive's patch_size [p0, p1, p2]
// is (z, y, x). Boxes are half-open [lo, hi) per axis and may extend past the image.
#pragma once

#include "core/status.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace voxseg::edit::interactive {

using Index3 = std::array<int64_t, 3>;  // (z, y, x)

struct Box {
    Index3 lo{};
    Index3 hi{};
};

// model.json "interactive" (docs/interactive.md): every value resolved by the exporter as
// nninteractive 2.6.0 resolves it when loading the model folder.
struct InteractiveSpec {
    std::string source = "nninteractive";
    std::string session_version;  // "2.6.0"
    std::string network;          // ONNX file of the package
    Index3 patch{};               // configuration patch_size
    int image_channels = 1;
    int interaction_channels = 7;  // prev_seg included
    int prev_seg = 0;
    // interaction name ("points", "bbox2d", "bbox3d", "scribble", "lasso") -> (positive,
    // negative) channel
    std::map<std::string, std::pair<int, int>> channel_pairs;
    std::map<std::string, bool> supported;
    bool supports_initial_label = true;
    int point_radius = 4;
    Index3 scribble_thickness{2, 2, 2};
    double interaction_decay = 0.98;
    std::string pad_mode_image = "constant";
    double max_zoom = 4.0;  // MAX_AUTOZOOM_FACTOR
    double zoom_growth = 1.5;
    // The margin (voxels per axis, z y x) that the refinement planning leaves uncovered at each
    // side of a patch-sized box: a box counts only its inner part as covered. nninteractive
    // 2.6.0 uses 24 whatever the patch (sized for its 192^3 window); a package may set its own
    // (model.json interactive.refinement_margin): at 64^3 a margin of 24 leaves 16^3 inner
    // voxels, so a zoomed prompt costs about (48/16)^3 = 27 times the boxes a margin of 8 does.
    Index3 refinement_margin{24, 24, 24};
    int num_classes = 2;
    std::string licence;
};

// Full-image prompt channels stored as IEEE binary16 bits (nnInteractive keeps them in fp16),
// channel-major, each channel (z, y, x) in C order.
struct InteractionChannels {
    Index3 shape{};
    int channels = 0;
    std::vector<uint16_t> bits;

    int64_t voxels() const { return shape[0] * shape[1] * shape[2]; }
    uint16_t* channel(int c) { return bits.data() + c * voxels(); }
    const uint16_t* channel(int c) const { return bits.data() + c * voxels(); }
};

// One network call: input [image_channels + interaction_channels, p0, p1, p2] float32 in,
// argmax over the classes [p0, p1, p2] out.
using Forward =
    std::function<Status(const std::vector<float>& input, std::vector<uint8_t>& argmax)>;

struct SessionState {
    Index3 shape{};
    std::vector<float> image;          // image_channels x shape, normalised once (set_image)
    InteractionChannels interactions;  // interaction_channels x shape
    std::vector<uint8_t> target;       // the caller's mask (0/1), shape
    double intensity = 1.0;            // current_interaction_intensity
    // Called before a prediction overwrites a region: channel >= 0 an interaction channel,
    // -1 the target. Undo saves the region's old contents there. May be empty.
    std::function<void(int channel, const Box& region)> before_write;
    // NumPy's legacy global generator (np.random, MT19937), which 2.6.0's refinement-box planning
    // draws from when its greedy cover leaves voxels (utils/bboxes.py random_sampling_fallback).
    // std::mt19937(s) is np.random.seed(s); parity needs both sides seeded alike (the goldens
    // seed np.random.seed(0) at the start of each session).
    std::mt19937 numpy_rng{0};
};

// What one prediction did, in order (the parity logs of tools/nninteractive_parity.py).
struct PredictionLog {
    struct NetworkCall {
        double zoom = 1.0;
        Box scaled_box;
    };
    std::vector<NetworkCall> forwards;
    std::vector<Box> refinement_boxes;
    std::optional<Box> paste_box;  // clipped to the image, as _clipped_last_paste_bbox
};

}  // namespace voxseg::edit::interactive
