#include "edit/interactive/interactive_session.h"

#include "edit/interactive/predict.h"
#include "edit/interactive/torch_sum.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace voxseg::edit::interactive {

namespace {

Box wholeImage(Index3 shape) { return Box{{0, 0, 0}, shape}; }

std::optional<Box> clipToImage(const Box& b, Index3 shape) {
    Box c;
    for (int a = 0; a < 3; ++a) {
        c.lo[a] = std::max<int64_t>(0, b.lo[a]);
        c.hi[a] = std::min(shape[a], b.hi[a]);
        if (c.hi[a] <= c.lo[a]) return std::nullopt;
    }
    return c;
}

int64_t boxVoxels(const Box& b) {
    return (b.hi[0] - b.lo[0]) * (b.hi[1] - b.lo[1]) * (b.hi[2] - b.lo[2]);
}

// Calls fn(image_index, box_index) for every voxel of `box`, C order.
template <typename Fn>
void forEachVoxel(const Box& box, Index3 shape, Fn&& fn) {
    int64_t k = 0;
    for (int64_t z = box.lo[0]; z < box.hi[0]; ++z)
        for (int64_t y = box.lo[1]; y < box.hi[1]; ++y) {
            int64_t i = (z * shape[1] + y) * shape[2] + box.lo[2];
            for (int64_t x = box.lo[2]; x < box.hi[2]; ++x) fn(i++, k++);
        }
}

std::optional<Box> unionBox(const std::optional<Box>& a, const Box& b) {
    if (!a) return b;
    Box u;
    for (int i = 0; i < 3; ++i) {
        u.lo[i] = std::min(a->lo[i], b.lo[i]);
        u.hi[i] = std::max(a->hi[i], b.hi[i]);
    }
    return u;
}

}  // namespace

size_t InteractiveDelta::bytes() const {
    size_t n = sizeof(*this);
    for (const Region& r : regions)
        n += r.interactions.size() * sizeof(uint16_t) + r.target.size() + sizeof(Region);
    return n;
}

InteractiveSession::InteractiveSession(InteractiveSpec spec, Forward forward)
    : spec_(std::move(spec)), forward_(std::move(forward)) {
    state_.before_write = [this](int channel, const Box& region) { record(channel, region); };
}

Status InteractiveSession::setImage(const std::vector<float>& values, Index3 shape, int channels) {
    if (shape[0] <= 0 || shape[1] <= 0 || shape[2] <= 0 || channels <= 0 ||
        static_cast<int64_t>(values.size()) != voxelCount(shape) * channels)
        return invalidArgument(fmt::format(
            "interactive session: the image has {} values, expected {} channel(s) of {} x {} x {}",
            values.size(), channels, shape[0], shape[1], shape[2]));
    if (channels != spec_.image_channels)
        return invalidArgument(fmt::format(
            "interactive session: the model takes {} image channel(s), the image has {}",
            spec_.image_channels, channels));
    const int64_t n = voxelCount(shape);
    // _nonzero_spatial_bbox over every channel: the box of voxels nonzero in any channel.
    std::vector<uint8_t> nonzero(static_cast<size_t>(n), 0);
    for (int c = 0; c < channels; ++c)
        for (int64_t i = 0; i < n; ++i)
            nonzero[static_cast<size_t>(i)] |= values[static_cast<size_t>(c * n + i)] != 0.0f;
    const std::optional<Box> box = nonzeroBox(nonzero, shape);
    if (!box)
        return invalidArgument(
            "interactive session: the image is entirely zero; cannot determine normalisation "
            "statistics");
    // torch: crop.mean() (its float32 sum, then divided by the count in float) and crop.std()
    // (squared deviations from that mean summed in double, divided by n - 1), in torch's order.
    const int64_t count = boxVoxels(*box);
    if (count < 2)
        return invalidArgument(
            "interactive session: the image's nonzero region is a single voxel; its standard "
            "deviation is undefined");
    const float mean =
        torchSum(values.data(), shape, *box, torch_threads_) / static_cast<float>(count);
    const float std_dev = torchStd(values.data(), shape, *box, mean, torch_threads_);
    if (!(std_dev > 0.0f) || !std::isfinite(std_dev))
        return invalidArgument(
            "interactive session: the image is constant inside its nonzero region (standard "
            "deviation 0); it cannot be normalised");

    state_ = SessionState{};
    state_.before_write = [this](int channel, const Box& region) { record(channel, region); };
    state_.shape = shape;
    state_.image.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) state_.image[i] = (values[i] - mean) / std_dev;
    state_.interactions.shape = shape;
    state_.interactions.channels = spec_.interaction_channels;
    state_.interactions.bits.assign(static_cast<size_t>(n * spec_.interaction_channels), 0);
    state_.target.assign(static_cast<size_t>(n), 0);
    state_.intensity = 1.0;
    dirty_.clear();
    last_.reset();
    log_ = {};
    return Status::ok();
}

Status InteractiveSession::setImage(const Volume& volume) {
    if (volume.empty()) return invalidArgument("interactive session: the image is empty");
    const auto size = volume.geometry().size;
    const Index3 shape{size[2], size[1], size[0]};
    std::vector<float> values(static_cast<size_t>(voxelCount(shape)));
    visitPixels(volume, [&](const auto* p) {
        for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(p[i]);
    });
    return setImage(values, shape, 1);
}

Status InteractiveSession::requireImage() const {
    if (!hasImage())
        return {StatusCode::kFailedPrecondition,
                "interactive session: no image is set; set an image before adding prompts"};
    return Status::ok();
}

Status InteractiveSession::checkSupported(const std::string& interaction) const {
    auto it = spec_.supported.find(interaction);
    if (it == spec_.supported.end() || !it->second)
        return unsupported("interactive session: this model does not support " + interaction +
                           " prompts");
    return Status::ok();
}

Result<std::pair<int, int>> InteractiveSession::channels(const std::string& interaction) const {
    auto it = spec_.channel_pairs.find(interaction);
    if (it == spec_.channel_pairs.end())
        return unsupported("interactive session: the model maps no channels to " + interaction +
                           " prompts");
    return it->second;
}

Status InteractiveSession::checkMask(const std::vector<uint8_t>& mask, const char* what) const {
    if (static_cast<int64_t>(mask.size()) != voxelCount(state_.shape))
        return invalidArgument(fmt::format(
            "interactive session: the {} mask has {} voxels, the image {} x {} x {} = {}", what,
            mask.size(), state_.shape[0], state_.shape[1], state_.shape[2],
            voxelCount(state_.shape)));
    return Status::ok();
}

void InteractiveSession::record(int channel, const Box& region) {
    const std::optional<Box> clipped = clipToImage(region, state_.shape);
    if (!clipped) return;
    const bool was_dirty = channel < 0 || dirty_.count(channel);
    if (channel >= 0) dirty_.insert(channel);
    if (!recording_) return;
    InteractiveDelta::Region r;
    r.channel = channel;
    r.box = *clipped;
    if (!was_dirty) {
        r.zero = true;  // a channel never written since it was zeroed: all zero
    } else if (channel >= 0) {
        const uint16_t* bits = state_.interactions.channel(channel);
        r.interactions.resize(static_cast<size_t>(boxVoxels(r.box)));
        forEachVoxel(r.box, state_.shape,
                     [&](int64_t i, int64_t k) { r.interactions[k] = bits[i]; });
    } else {
        r.target.resize(static_cast<size_t>(boxVoxels(r.box)));
        forEachVoxel(r.box, state_.shape,
                     [&](int64_t i, int64_t k) { r.target[k] = state_.target[i]; });
    }
    recording_->regions.push_back(std::move(r));
}

std::optional<Box> InteractiveSession::swap(InteractiveDelta& delta) {
    // The target's changed box: diff over the hull of the target regions (2.6.0's undo()).
    std::optional<Box> hull;
    for (const auto& r : delta.regions)
        if (r.channel < 0) hull = unionBox(hull, r.box);
    std::vector<uint8_t> before;
    if (hull)
        forEachVoxel(*hull, state_.shape,
                     [&](int64_t i, int64_t) { before.push_back(state_.target[i]); });

    auto exchange = [&](InteractiveDelta::Region& r) {
        if (r.channel >= 0) {
            uint16_t* bits = state_.interactions.channel(r.channel);
            std::vector<uint16_t> now(static_cast<size_t>(boxVoxels(r.box)));
            forEachVoxel(r.box, state_.shape, [&](int64_t i, int64_t k) {
                now[k] = bits[i];
                bits[i] = r.zero ? uint16_t{0} : r.interactions[k];
            });
            r.interactions = std::move(now);
        } else {
            std::vector<uint8_t> now(static_cast<size_t>(boxVoxels(r.box)));
            forEachVoxel(r.box, state_.shape, [&](int64_t i, int64_t k) {
                now[k] = state_.target[i];
                state_.target[i] = r.zero ? uint8_t{0} : r.target[k];
            });
            r.target = std::move(now);
        }
        r.zero = false;
    };
    // Undo restores in reverse write order; the swapped-out contents then redo in write order.
    if (delta.applied_) {
        for (auto it = delta.regions.rbegin(); it != delta.regions.rend(); ++it) exchange(*it);
    } else {
        for (auto& r : delta.regions) exchange(r);
    }
    std::swap(state_.intensity, delta.intensity);
    std::swap(queue_, delta.queue);
    // A superset of the channels that may be nonzero stays correct either way.
    for (int c : delta.dirty) dirty_.insert(c);
    delta.dirty = dirty_;
    delta.applied_ = !delta.applied_;

    if (!hull) return std::nullopt;
    std::optional<Box> changed;
    forEachVoxel(*hull, state_.shape, [&](int64_t i, int64_t k) {
        if (before[static_cast<size_t>(k)] == state_.target[static_cast<size_t>(i)]) return;
        const int64_t x = i % state_.shape[2];
        const int64_t y = (i / state_.shape[2]) % state_.shape[1];
        const int64_t z = i / (state_.shape[2] * state_.shape[1]);
        changed = unionBox(changed, Box{{z, y, x}, {z + 1, y + 1, x + 1}});
    });
    return changed;
}

template <typename Op>
Result<std::optional<Box>> InteractiveSession::undoable(Op&& op) {
    std::shared_ptr<InteractiveDelta> previous = last_;
    auto delta = std::make_shared<InteractiveDelta>();
    delta->intensity = state_.intensity;
    delta->queue = queue_;
    delta->dirty = dirty_;
    recording_ = delta.get();
    last_ = delta;
    Result<std::optional<Box>> result = op();
    recording_ = nullptr;
    if (!result.isOk()) {
        swap(*delta);  // roll back everything the failed prompt changed
        last_ = previous;
    }
    return result;
}

Result<std::optional<Box>> InteractiveSession::runPrediction(bool force_full_refine) {
    if (queue_.empty()) return std::optional<Box>{};  // 2.6.0: "Nothing to do"
    const QueuedWindow window = queue_.back();
    log_ = {};
    VOXSEG_ASSIGN_OR_RETURN(
        std::optional<Box> changed,
        predict(state_, spec_, window.center, std::min(spec_.max_zoom, window.zoom), autozoom_,
                force_full_refine, forward_, &log_));
    queue_.clear();
    return changed;
}

Result<std::optional<Box>> InteractiveSession::addPoint(const Point3& point, bool include,
                                                        bool run_prediction) {
    VOXSEG_RETURN_IF_ERROR(requireImage());
    VOXSEG_RETURN_IF_ERROR(checkSupported("points"));
    VOXSEG_ASSIGN_OR_RETURN(auto pair, channels("points"));
    if (point_kernel_.size == 0) {
        VOXSEG_ASSIGN_OR_RETURN(point_kernel_, pointKernel(spec_.point_radius));
    }
    Index3 center{};
    for (int a = 0; a < 3; ++a) {
        center[a] = std::isfinite(point[a]) ? roundHalfEven(point[a]) : -1;
        if (center[a] < 0 || center[a] >= state_.shape[a])
            return invalidArgument(fmt::format(
                "interactive session: point ({}, {}, {}) (z, y, x) is outside the image of {} x "
                "{} x {} voxels",
                point[0], point[1], point[2], state_.shape[0], state_.shape[1], state_.shape[2]));
    }
    const int channel = include ? pair.first : pair.second;
    return undoable([&]() -> Result<std::optional<Box>> {
        queue_.push_back(windowForPoint(center));
        VOXSEG_RETURN_IF_ERROR(prepareNewInteractionIntensity(state_, spec_));
        placePoint(state_, channel, center, point_kernel_);
        if (!run_prediction) return std::optional<Box>{};
        return runPrediction(false);
    });
}

Result<std::optional<Box>> InteractiveSession::addBox(const BoxRequest& box, bool include,
                                                      bool run_prediction) {
    VOXSEG_RETURN_IF_ERROR(requireImage());
    VOXSEG_ASSIGN_OR_RETURN(std::string kind, boxKind(box, spec_));
    VOXSEG_ASSIGN_OR_RETURN(auto pair, channels(kind));
    for (int a = 0; a < 3; ++a)
        if (box.hi[a] <= 0.0 || box.lo[a] >= static_cast<double>(state_.shape[a]))
            return invalidArgument(fmt::format(
                "interactive session: box [[{}, {}], [{}, {}], [{}, {}]] (z, y, x) is outside the "
                "image of {} x {} x {} voxels",
                box.lo[0], box.hi[0], box.lo[1], box.hi[1], box.lo[2], box.hi[2], state_.shape[0],
                state_.shape[1], state_.shape[2]));
    const Box clipped = roundAndClipBox(box, state_.shape);
    const int channel = include ? pair.first : pair.second;
    return undoable([&]() -> Result<std::optional<Box>> {
        queue_.push_back(windowForRegion(clipped, spec_.patch));
        VOXSEG_RETURN_IF_ERROR(prepareNewInteractionIntensity(state_, spec_));
        writeBox(state_, channel, clipped);
        if (!run_prediction) return std::optional<Box>{};
        return runPrediction(false);
    });
}

Result<std::optional<Box>> InteractiveSession::addMask(const std::string& interaction,
                                                       const uint8_t* mask, size_t size,
                                                       const Box& box, bool include,
                                                       bool run_prediction) {
    VOXSEG_RETURN_IF_ERROR(requireImage());
    VOXSEG_RETURN_IF_ERROR(checkSupported(interaction));
    VOXSEG_ASSIGN_OR_RETURN(auto pair, channels(interaction));
    const Index3 local{box.hi[0] - box.lo[0], box.hi[1] - box.lo[1], box.hi[2] - box.lo[2]};
    for (int a = 0; a < 3; ++a)
        if (box.lo[a] < 0 || box.hi[a] > state_.shape[a] || local[a] <= 0)
            return invalidArgument(fmt::format(
                "interactive session: the {} mask's box [[{}, {}], [{}, {}], [{}, {}]] is not "
                "inside the image of {} x {} x {} voxels",
                interaction, box.lo[0], box.hi[0], box.lo[1], box.hi[1], box.lo[2], box.hi[2],
                state_.shape[0], state_.shape[1], state_.shape[2]));
    if (static_cast<int64_t>(size) != voxelCount(local))
        return invalidArgument(
            fmt::format("interactive session: the {} mask has {} voxels, its box {} x {} x {} = {}",
                        interaction, size, local[0], local[1], local[2], voxelCount(local)));
    std::optional<Box> region = nonzeroBox(mask, local);
    if (!region)
        return invalidArgument("interactive session: the " + interaction +
                               " mask is empty: draw something first");
    for (int a = 0; a < 3; ++a) region->lo[a] += box.lo[a], region->hi[a] += box.lo[a];
    const int channel = include ? pair.first : pair.second;
    return undoable([&]() -> Result<std::optional<Box>> {
        queue_.push_back(windowForRegion(*region, spec_.patch));
        VOXSEG_RETURN_IF_ERROR(prepareNewInteractionIntensity(state_, spec_));
        maxWriteMask(state_, channel, mask, box, *region);
        if (!run_prediction) return std::optional<Box>{};
        return runPrediction(false);
    });
}

Result<std::optional<Box>> InteractiveSession::addScribbleMask(const std::vector<uint8_t>& mask,
                                                               bool include, bool run_prediction) {
    return addMask("scribble", mask.data(), mask.size(), wholeImage(state_.shape), include,
                   run_prediction);
}

Result<std::optional<Box>> InteractiveSession::addScribbleMask(const MaskPrompt& prompt,
                                                               bool include, bool run_prediction) {
    return addMask("scribble", prompt.mask.data(), prompt.mask.size(), prompt.box, include,
                   run_prediction);
}

Result<std::optional<Box>> InteractiveSession::addLassoMask(const std::vector<uint8_t>& mask,
                                                            bool include, bool run_prediction) {
    return addMask("lasso", mask.data(), mask.size(), wholeImage(state_.shape), include,
                   run_prediction);
}

Result<std::optional<Box>> InteractiveSession::addLassoMask(const MaskPrompt& prompt, bool include,
                                                            bool run_prediction) {
    return addMask("lasso", prompt.mask.data(), prompt.mask.size(), prompt.box, include,
                   run_prediction);
}

Result<std::optional<Box>> InteractiveSession::addScribble(const std::vector<Point3>& points,
                                                           bool include, bool run_prediction) {
    VOXSEG_RETURN_IF_ERROR(requireImage());
    VOXSEG_RETURN_IF_ERROR(checkSupported("scribble"));
    VOXSEG_ASSIGN_OR_RETURN(SlicePlane plane, findSlicePlane(points, state_.shape, "scribble"));
    double thickness = 0.0;
    for (int a = 0; a < 3; ++a)
        if (a != plane.axis)
            thickness = std::max(thickness, static_cast<double>(spec_.scribble_thickness[a]));
    VOXSEG_ASSIGN_OR_RETURN(MaskPrompt mask, drawScribble(points, thickness, state_.shape));
    return addScribbleMask(mask, include, run_prediction);
}

Result<std::optional<Box>> InteractiveSession::addLasso(const std::vector<Point3>& points,
                                                        bool include, bool run_prediction) {
    VOXSEG_RETURN_IF_ERROR(requireImage());
    VOXSEG_RETURN_IF_ERROR(checkSupported("lasso"));
    VOXSEG_ASSIGN_OR_RETURN(MaskPrompt mask, drawLasso(points, state_.shape));
    return addLassoMask(mask, include, run_prediction);
}

Result<std::optional<Box>> InteractiveSession::addInitialSegmentation(
    const std::vector<uint8_t>& mask, bool run_prediction) {
    VOXSEG_RETURN_IF_ERROR(requireImage());
    if (!spec_.supports_initial_label)
        return unsupported(
            "interactive session: this model does not support an initial segmentation");
    VOXSEG_RETURN_IF_ERROR(checkMask(mask, "initial segmentation"));
    return undoable([&]() -> Result<std::optional<Box>> {
        // One undoable step: every channel and the whole target are saved (channels never
        // written cost nothing), then everything is cleared (reset_interactions keeps the queue).
        const Box whole = wholeImage(state_.shape);
        for (int c = 0; c < state_.interactions.channels; ++c) record(c, whole);
        record(-1, whole);
        std::fill(state_.interactions.bits.begin(), state_.interactions.bits.end(), uint16_t{0});
        dirty_.clear();
        state_.intensity = 1.0;
        state_.target = mask;
        writeMaskChannel(state_, spec_.prev_seg, mask);
        if (!run_prediction) return std::optional<Box>{whole};
        if (const std::optional<Box> region = nonzeroBox(mask, state_.shape))
            queue_.push_back(windowForRegion(*region, spec_.patch));
        VOXSEG_RETURN_IF_ERROR(runPrediction(true).status());
        return std::optional<Box>{whole};
    });
}

UndoResult InteractiveSession::undo() {
    if (!last_) return {};
    UndoResult r;
    r.undone = true;
    r.changed = swap(*last_);
    last_.reset();
    return r;
}

Status InteractiveSession::resetInteractions() {
    VOXSEG_RETURN_IF_ERROR(requireImage());
    last_.reset();
    std::fill(state_.interactions.bits.begin(), state_.interactions.bits.end(), uint16_t{0});
    std::fill(state_.target.begin(), state_.target.end(), uint8_t{0});
    dirty_.clear();
    state_.intensity = 1.0;
    return Status::ok();
}

std::shared_ptr<InteractiveDelta> InteractiveSession::takeLastDelta() {
    std::shared_ptr<InteractiveDelta> d = std::move(last_);
    last_.reset();
    return d;
}

Result<std::optional<Box>> InteractiveSession::revert(InteractiveDelta& delta) {
    if (!delta.applied())
        return Status(StatusCode::kFailedPrecondition,
                      "interactive session: this prompt is already undone");
    return swap(delta);
}

Result<std::optional<Box>> InteractiveSession::reapply(InteractiveDelta& delta) {
    if (delta.applied())
        return Status(StatusCode::kFailedPrecondition,
                      "interactive session: this prompt is already applied");
    return swap(delta);
}

}  // namespace voxseg::edit::interactive
