// nnInteractive 2.6.0's _predict and the helpers it calls (_build_network_input,
// _detect_change_at_border, _plan_refinement_bboxes, _compute_local_diff_map,
// _refine_coarse_with_local_cache, the pastes), restated for voxseg's session state. Windows
// are cut out of the full-image state; nothing here loops over the whole image except the
// initial-segmentation case (force_full_refine), which 2.6.0 scans whole too.
#include "edit/interactive/predict.h"

#include "edit/interactive/refinement_boxes.h"
#include "edit/interactive/resample.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace voxseg::edit::interactive {
namespace {

constexpr uint16_t kHalfOne = 0x3c00;

// [c - s // 2, c + s // 2 + s % 2) per axis.
Box centeredBox(const Index3& c, const Index3& s) {
    Box b;
    for (int d = 0; d < 3; ++d) {
        b.lo[d] = c[d] - s[d] / 2;
        b.hi[d] = c[d] + s[d] / 2 + s[d] % 2;
    }
    return b;
}

Box shifted(const Box& b, const Index3& by, int sign) {
    Box r = b;
    for (int d = 0; d < 3; ++d) {
        r.lo[d] += sign * by[d];
        r.hi[d] += sign * by[d];
    }
    return r;
}

std::optional<Box> unionBoxes(const std::optional<Box>& a, const std::optional<Box>& b) {
    if (!a) return b;
    if (!b) return a;
    Box u;
    for (int d = 0; d < 3; ++d) {
        u.lo[d] = std::min(a->lo[d], b->lo[d]);
        u.hi[d] = std::max(a->hi[d], b->hi[d]);
    }
    return u;
}

// Channels dilated before area downsampling (_get_dilation_channels_for_resample).
std::set<int> dilationChannels(const InteractiveSpec& spec) {
    std::set<int> out;
    for (const char* key : {"points", "scribble"}) {
        const auto s = spec.supported.find(key);
        if (s == spec.supported.end() || !s->second) continue;
        const auto p = spec.channel_pairs.find(key);
        if (p == spec.channel_pairs.end()) continue;
        out.insert(p->second.first);
        out.insert(p->second.second);
    }
    return out;
}

// _normalize_interaction_channels_for_network_ on a window of `n` voxels per channel.
void normalizeInteractions(uint16_t* channels, int count, int64_t n, int prev_seg,
                           double intensity) {
    if (intensity == 0.0 || intensity == 1.0) return;
    for (int c = 0; c < count; ++c)
        if (c != prev_seg) divideHalf(channels + c * n, n, intensity);
}

// The box of a window's nonzero fp16 values, and whether all of them are positive.
struct Support {
    Box box;
    bool positive = true;
};

std::optional<Support> nonzeroSupport(const std::vector<uint16_t>& v, const Index3& s) {
    Support r{{{s[0], s[1], s[2]}, {-1, -1, -1}}, true};
    bool any = false;
    for (int64_t z = 0; z < s[0]; ++z)
        for (int64_t y = 0; y < s[1]; ++y) {
            const uint16_t* row = v.data() + (z * s[1] + y) * s[2];
            int64_t first = -1, last = -1;
            for (int64_t x = 0; x < s[2]; ++x)
                if (row[x]) {
                    if (first < 0) first = x;
                    last = x;
                    r.positive &= (row[x] & 0x8000) == 0;
                }
            if (first < 0) continue;
            any = true;
            r.box.lo = {std::min(r.box.lo[0], z), std::min(r.box.lo[1], y),
                        std::min(r.box.lo[2], first)};
            r.box.hi = {std::max(r.box.hi[0], z + 1), std::max(r.box.hi[1], y + 1),
                        std::max(r.box.hi[2], last + 1)};
        }
    if (!any) return std::nullopt;
    return r;
}

// iterative_3x3_same_padding_pool3d(window, ks) (max) and the box holding its nonzero values.
// For positive values only the support grown by the kernel radius can be nonzero, and there the
// window clipped to that box has the same maximum (what it leaves out is zero).
std::pair<std::vector<uint16_t>, Box> dilateWithin(const std::vector<uint16_t>& v, const Index3& s,
                                                   const Support& support, int ks) {
    if (!support.positive) return {poolSame(v.data(), s, ks, false), Box{{0, 0, 0}, s}};
    const int64_t r = (ks - 1) / 2;
    Box grown = support.box;
    for (int d = 0; d < 3; ++d) {
        grown.lo[d] = std::max<int64_t>(0, grown.lo[d] - r);
        grown.hi[d] = std::min<int64_t>(s[d], grown.hi[d] + r);
    }
    std::vector<uint16_t> sub(static_cast<size_t>(voxelCount(boxSize(grown))));
    cropInto(v.data(), s, grown, sub.data());
    const auto pooled = poolSame(sub.data(), boxSize(grown), ks, false);
    std::vector<uint16_t> out(v.size(), 0);
    pasteInto(pooled.data(), grown, out.data(), s, [](uint16_t x) { return x; });
    return {std::move(out), grown};
}

struct NetworkInput {
    Index3 scaled{};
    Box scaled_box;
    std::vector<uint16_t> previous;  // prev_seg as the network sees it (patch-sized, fp16)
};

// Writes the window `box` of a (z, y, x) volume into `dst` (box-sized): zero outside the volume,
// each in-volume row through row(src, dst, n).
template <typename S, typename D, typename F>
void windowRows(const S* src, const Index3& shape, const Box& box, D* dst, F row) {
    const Index3 bs = boxSize(box);
    const int64_t x0 = std::max<int64_t>(box.lo[2], 0);
    const int64_t x1 = std::min<int64_t>(box.hi[2], shape[2]);
    // Slices in parallel: a 192^3 window of 8 channels is 226 MB of float written per click.
#pragma omp parallel for schedule(static) if (bs[0] * bs[1] * bs[2] >= (int64_t{1} << 16))
    for (int64_t z = 0; z < bs[0]; ++z)
        for (int64_t y = 0; y < bs[1]; ++y) {
            D* out = dst + (z * bs[1] + y) * bs[2];
            const int64_t gz = box.lo[0] + z, gy = box.lo[1] + y;
            if (gz < 0 || gz >= shape[0] || gy < 0 || gy >= shape[1] || x1 <= x0) {
                std::fill(out, out + bs[2], D{});
                continue;
            }
            std::fill(out, out + (x0 - box.lo[2]), D{});
            row(src + (gz * shape[1] + gy) * shape[2] + x0, out + (x0 - box.lo[2]), x1 - x0);
            std::fill(out + (x1 - box.lo[2]), out + bs[2], D{});
        }
}

// _build_network_input: the window of round(patch * zoom) around `center`, zero-padded past
// the image, shrunk to the patch when zoomed (image trilinear, prev_seg nearest, interactions
// area after dilating the thin prompt channels), interactions normalised by the intensity.
// Every value of `input` ([image + interaction channels, patch]) is written.
NetworkInput buildNetworkInput(const SessionState& st, const InteractiveSpec& spec,
                               const Index3& center, double zoom, std::vector<float>& input) {
    NetworkInput r;
    const Index3& patch = spec.patch;
    for (int d = 0; d < 3; ++d) r.scaled[d] = roundHalfEven(static_cast<double>(patch[d]) * zoom);
    r.scaled_box = centeredBox(center, r.scaled);
    const int64_t np = voxelCount(patch), ns = voxelCount(r.scaled), nv = voxelCount(st.shape);
    const int ci = spec.image_channels, cn = spec.interaction_channels;
    input.resize(static_cast<size_t>((ci + cn) * np));
    const auto copy_row = [](const float* s, float* d, int64_t n) { std::copy_n(s, n, d); };

    if (r.scaled == patch) {  // the window as it is
        for (int c = 0; c < ci; ++c)
            windowRows(st.image.data() + c * nv, st.shape, r.scaled_box, input.data() + c * np,
                       copy_row);
        const float b = static_cast<float>(st.intensity);
        const bool scaled = st.intensity != 0.0 && st.intensity != 1.0;
        for (int c = 0; c < cn; ++c) {
            float* dst = input.data() + (ci + c) * np;
            if (c == spec.prev_seg) {
                r.previous.resize(static_cast<size_t>(np));
                windowRows(st.interactions.channel(c), st.shape, r.scaled_box, r.previous.data(),
                           [](const uint16_t* s, uint16_t* d, int64_t n) { std::copy_n(s, n, d); });
                halfRowToFloat(r.previous.data(), dst, np);
            } else if (!scaled) {
                windowRows(st.interactions.channel(c), st.shape, r.scaled_box, dst, halfRowToFloat);
            } else {  // _normalize_interaction_channels_for_network_: fp16 / intensity
                windowRows(st.interactions.channel(c), st.shape, r.scaled_box, dst,
                           [b](const uint16_t* s, float* d, int64_t n) {
                               for (int64_t i = 0; i < n; ++i)
                                   d[i] = s[i] ? fromHalf(toHalf(fromHalf(s[i]) / b)) : 0.0f;
                           });
            }
        }
        return r;
    }

    std::vector<float> img(static_cast<size_t>(ns));
    for (int c = 0; c < ci; ++c) {
        windowRows(st.image.data() + c * nv, st.shape, r.scaled_box, img.data(), copy_row);
        const auto small = resizeTrilinear(img.data(), r.scaled, patch);
        std::copy(small.begin(), small.end(), input.begin() + c * np);
    }
    std::vector<uint16_t> inter(static_cast<size_t>(cn * np), 0);
    const int ks = roundToNearestOdd(zoom * 2 - 1);
    const std::set<int> dilate = ks > 1 ? dilationChannels(spec) : std::set<int>{};
    std::vector<uint16_t> padded(static_cast<size_t>(ns));
    for (int c = 0; c < cn; ++c) {
        windowRows(st.interactions.channel(c), st.shape, r.scaled_box, padded.data(),
                   [](const uint16_t* s, uint16_t* d, int64_t n) { std::copy_n(s, n, d); });
        if (c == spec.prev_seg) r.previous = resizeNearest(padded.data(), r.scaled, patch);
        // Zeros pool and average to zeros: only the nonzero part needs resampling.
        const auto support = nonzeroSupport(padded, r.scaled);
        if (!support) continue;
        std::vector<uint16_t> small;
        if (dilate.count(c)) {
            const auto pooled = dilateWithin(padded, r.scaled, *support, ks);
            small = resizeArea(pooled.first.data(), r.scaled, patch, &pooled.second);
        } else {
            small = resizeArea(padded.data(), r.scaled, patch, &support->box);
        }
        std::copy(small.begin(), small.end(), inter.begin() + c * np);
    }
    normalizeInteractions(inter.data(), cn, np, spec.prev_seg, st.intensity);
    halfRowToFloat(inter.data(), input.data() + ci * np, cn * np);
    return r;
}

// _detect_change_at_border: compares the six faces of the prediction with the previous
// segmentation the network saw; true on the first face that changed enough.
bool borderChanged(const std::vector<uint8_t>& pred, const std::vector<uint16_t>& prev,
                   const Index3& s) {
    for (int dim = 0; dim < 3; ++dim)
        for (const int64_t idx : {int64_t{0}, s[dim] - 1}) {
            float n_prev = 0, n_curr = 0, n_diff = 0;
            Index3 lo{0, 0, 0}, hi = s;
            lo[dim] = idx;
            hi[dim] = idx + 1;
            for (int64_t z = lo[0]; z < hi[0]; ++z)
                for (int64_t y = lo[1]; y < hi[1]; ++y)
                    for (int64_t x = lo[2]; x < hi[2]; ++x) {
                        const int64_t i = (z * s[1] + y) * s[2] + x;
                        const float p = fromHalf(prev[i]), c = pred[i];
                        n_prev += p;
                        n_curr += c;
                        n_diff += p != c ? 1.0f : 0.0f;
                    }
            const double a = n_prev, b = n_curr, diff = n_diff;
            const double rel = std::max(a, b) / std::max(std::min(a, b), 1e-5) - 1;
            if (diff > 1500) return true;
            if (diff > 100 && rel > 0.2) return true;
        }
    return false;
}

// Bounding box of prev_seg > 0.5 over the whole image (_compute_prev_seg_positive_bbox).
std::optional<Box> prevSegBox(const SessionState& st, int prev_seg) {
    const uint16_t* p = st.interactions.channel(prev_seg);
    const Index3& s = st.shape;
    Box b{{s[0], s[1], s[2]}, {-1, -1, -1}};
    bool any = false;
    for (int64_t z = 0; z < s[0]; ++z)
        for (int64_t y = 0; y < s[1]; ++y)
            for (int64_t x = 0; x < s[2]; ++x)
                if (fromHalf(p[(z * s[1] + y) * s[2] + x]) > 0.5f) {
                    any = true;
                    const Index3 c{z, y, x};
                    for (int d = 0; d < 3; ++d) {
                        b.lo[d] = std::min(b.lo[d], c[d]);
                        b.hi[d] = std::max(b.hi[d], c[d] + 1);
                    }
                }
    if (!any) return std::nullopt;
    return b;
}

// _compute_local_diff_map (+ _mark_prev_seg_in_local_diff when forced): where the coarse
// prediction differs from prev_seg inside the seen window, opened then closed... in 2.6.0's
// order: a 5^3 min pool then a 5^3 max pool over the seen part; local to `planning`.
std::vector<uint8_t> localDiff(const SessionState& st, int prev_seg,
                               const std::vector<uint8_t>& pred, const Box& scaled_box,
                               const Box& planning, bool mark_prev_seg) {
    const Index3 ps = boxSize(planning);
    std::vector<uint8_t> diff(static_cast<size_t>(voxelCount(ps)), 0);
    const auto seen = clipBox(scaled_box, st.shape);
    const Index3 pred_shape = boxSize(scaled_box);
    const uint16_t* prev = st.interactions.channel(prev_seg);
    if (seen) {
        const Index3 ss = boxSize(*seen);
        std::vector<uint8_t> d(static_cast<size_t>(voxelCount(ss)));
        for (int64_t z = 0; z < ss[0]; ++z)
            for (int64_t y = 0; y < ss[1]; ++y)
                for (int64_t x = 0; x < ss[2]; ++x) {
                    const Index3 g{seen->lo[0] + z, seen->lo[1] + y, seen->lo[2] + x};
                    const int64_t pi =
                        ((g[0] - scaled_box.lo[0]) * pred_shape[1] + (g[1] - scaled_box.lo[1])) *
                            pred_shape[2] +
                        (g[2] - scaled_box.lo[2]);
                    const float p =
                        fromHalf(prev[(g[0] * st.shape[1] + g[1]) * st.shape[2] + g[2]]);
                    d[(z * ss[1] + y) * ss[2] + x] = static_cast<float>(pred[pi]) != p;
                }
        d = poolSame(d.data(), ss, 5, true);
        d = poolSame(d.data(), ss, 5, false);
        pasteInto(d.data(), shifted(*seen, planning.lo, -1), diff.data(), ps,
                  [](uint8_t v) { return v; });
    }
    if (mark_prev_seg) {
        for (int64_t z = 0; z < ps[0]; ++z)
            for (int64_t y = 0; y < ps[1]; ++y)
                for (int64_t x = 0; x < ps[2]; ++x) {
                    const Index3 g{planning.lo[0] + z, planning.lo[1] + y, planning.lo[2] + x};
                    if (fromHalf(prev[(g[0] * st.shape[1] + g[1]) * st.shape[2] + g[2]]) > 0.5f)
                        diff[(z * ps[1] + y) * ps[2] + x] = 1;
                }
    }
    return diff;
}

// _plan_refinement_bboxes.
std::vector<Box> planRefinement(SessionState& st, const InteractiveSpec& spec,
                                const std::vector<uint8_t>& pred, const Box& scaled_box,
                                bool force_full_refine, const Index3& center) {
    const auto fallback = [&] {
        Box b;
        for (int d = 0; d < 3; ++d) {
            b.lo[d] = center[d] - spec.patch[d] / 2;
            b.hi[d] = b.lo[d] + spec.patch[d];
        }
        return std::vector<Box>{b};
    };
    std::optional<Box> planning = clipBox(scaled_box, st.shape);
    if (force_full_refine) planning = unionBoxes(planning, prevSegBox(st, spec.prev_seg));
    if (!planning) return fallback();
    if (!clipBox(scaled_box, st.shape)) return fallback();  // 2.6.0: an empty diff map
    const auto diff = localDiff(st, spec.prev_seg, pred, scaled_box, *planning, force_full_refine);
    auto boxes = coverWithBoxes(diff, boxSize(*planning), spec.patch, spec.refinement_margin, 3,
                                st.numpy_rng);
    if (boxes.empty()) return fallback();
    for (Box& b : boxes) b = shifted(b, planning->lo, +1);
    return boxes;
}

// True when `channel` (a full-image fp16 channel) is zero over the in-image part of `box`.
bool allZeroIn(const uint16_t* channel, const Index3& shape, const Box& box) {
    const auto in = clipBox(box, shape);
    if (!in) return true;
    for (int64_t z = in->lo[0]; z < in->hi[0]; ++z)
        for (int64_t y = in->lo[1]; y < in->hi[1]; ++y) {
            const uint16_t* row = channel + (z * shape[1] + y) * shape[2];
            if (std::any_of(row + in->lo[2], row + in->hi[2], [](uint16_t v) { return v != 0; }))
                return false;
        }
    return true;
}

// _refine_coarse_with_local_cache: run the network on each refinement box of a cache that
// holds the coarse prediction as prev_seg, then commit only the refined boxes.
Status refineCoarse(SessionState& st, const InteractiveSpec& spec, const std::vector<Box>& boxes,
                    const std::vector<uint8_t>& coarse, const Box& coarse_box,
                    const Forward& forward, PredictionLog* log) {
    if (spec.image_channels != 1)
        return unsupported(
            "refinement needs a one-channel image (nnInteractive 2.6.0 refines "
            "on channel 0 only)");
    Box cache_box = boxes.front();
    for (const Box& b : boxes) cache_box = *unionBoxes(cache_box, b);
    const Index3 cs = boxSize(cache_box);
    const int64_t nc = voxelCount(cs);
    const int cn = spec.interaction_channels, ps = spec.prev_seg;
    // Only prev_seg is cached: the boxes write their refinement into it in turn. The image and
    // the prompt channels do not change while the boxes run: each box reads them from the state
    // (2.6.0 crops all of them into the cache; the values the network sees are the same).
    std::vector<uint16_t> prev(static_cast<size_t>(nc), 0);
    cropInto(st.interactions.channel(ps), st.shape, cache_box, prev.data());

    // The coarse prediction, inside the image only, into the cache's prev_seg channel.
    if (const auto inject = clipBox(coarse_box, st.shape)) {
        const Index3 cb = boxSize(coarse_box);
        const Index3 is = boxSize(*inject);
        std::vector<uint8_t> sub(static_cast<size_t>(voxelCount(is)));
        for (int64_t z = 0; z < is[0]; ++z)
            for (int64_t y = 0; y < is[1]; ++y) {
                const uint8_t* src = coarse.data() +
                                     ((inject->lo[0] - coarse_box.lo[0] + z) * cb[1] +
                                      (inject->lo[1] - coarse_box.lo[1] + y)) *
                                         cb[2] +
                                     (inject->lo[2] - coarse_box.lo[2]);
                std::copy(src, src + is[2], sub.begin() + (z * is[1] + y) * is[2]);
            }
        pasteInto(sub.data(), shifted(*inject, cache_box.lo, -1), prev.data(), cs,
                  [](uint8_t v) { return v ? kHalfOne : uint16_t{0}; });
    }

    const Index3& p = spec.patch;
    const int64_t np = voxelCount(p);
    std::vector<float> input(static_cast<size_t>((1 + cn) * np), 0.0f);
    // Prompt channels empty over the whole cache stay zero in every box: not copied per box.
    std::vector<int> prompts;
    for (int c = 0; c < cn; ++c)
        if (c != ps && !allZeroIn(st.interactions.channel(c), st.shape, cache_box))
            prompts.push_back(c);
    // _normalize_interaction_channels_for_network_ (fp16 / intensity), applied per row.
    const bool scale = st.intensity != 0.0 && st.intensity != 1.0;
    const float divisor = static_cast<float>(st.intensity);
    std::vector<uint8_t> argmax;
    for (const Box& b : boxes) {
        const Box local = shifted(b, cache_box.lo, -1);
        // The box's x range inside the image; voxels outside the image are zero (2.6.0 pads).
        const int64_t x0 = std::clamp<int64_t>(-b.lo[2], 0, p[2]);
        const int64_t x1 = std::clamp<int64_t>(st.shape[2] - b.lo[2], x0, p[2]);
        for (int64_t z = 0; z < p[0]; ++z)
            for (int64_t y = 0; y < p[1]; ++y) {
                const int64_t src =
                    ((local.lo[0] + z) * cs[1] + local.lo[1] + y) * cs[2] + local.lo[2];
                const int64_t dst = (z * p[1] + y) * p[2];
                halfRowToFloat(prev.data() + src, input.data() + (1 + ps) * np + dst, p[2]);
                const int64_t gz = b.lo[0] + z, gy = b.lo[1] + y;
                const bool inside = gz >= 0 && gz < st.shape[0] && gy >= 0 && gy < st.shape[1];
                const int64_t a = inside ? x0 : 0, e = inside ? x1 : 0;
                // The image index of the box row's first in-image voxel (x = b.lo[2] + a).
                const int64_t g = inside ? (gz * st.shape[1] + gy) * st.shape[2] + b.lo[2] + a : 0;
                float* row = input.data() + dst;
                std::fill(row, row + a, 0.0f);
                std::copy_n(st.image.data() + g, e - a, row + a);
                std::fill(row + std::max(a, e), row + p[2], 0.0f);
                for (const int c : prompts) {
                    float* out = input.data() + (1 + c) * np + dst;
                    const uint16_t* in = st.interactions.channel(c) + g;
                    std::fill(out, out + a, 0.0f);
                    if (scale) {
                        for (int64_t x = 0; x < e - a; ++x)
                            out[a + x] = in[x] ? fromHalf(toHalf(fromHalf(in[x]) / divisor)) : 0.0f;
                    } else {
                        halfRowToFloat(in, out + a, e - a);
                    }
                    std::fill(out + std::max(a, e), out + p[2], 0.0f);
                }
            }
        if (log) log->forwards.push_back({1.0, b});
        if (Status s = forward(input, argmax); !s) return s;
        pasteInto(argmax.data(), local, prev.data(), cs,
                  [](uint8_t v) { return v ? kHalfOne : uint16_t{0}; });
    }

    if (const auto hull = clipBox(cache_box, st.shape)) {
        if (st.before_write) {
            st.before_write(ps, *hull);
            st.before_write(-1, *hull);
        }
    }
    const uint16_t* refined = prev.data();
    std::vector<uint16_t> win(static_cast<size_t>(np));
    for (const Box& b : boxes) {
        const Box local = shifted(b, cache_box.lo, -1);
        win.assign(static_cast<size_t>(voxelCount(boxSize(b))), 0);
        cropInto(refined, cs, local, win.data());
        pasteInto(win.data(), b, st.interactions.channel(ps), st.shape,
                  [](uint16_t v) { return v; });
        pasteInto(win.data(), b, st.target.data(), st.shape,
                  [](uint16_t v) { return static_cast<uint8_t>(fromHalf(v)); });
    }
    return Status::ok();
}

}  // namespace

Result<std::optional<Box>> predict(SessionState& st, const InteractiveSpec& spec, Index3 center,
                                   double zoom, bool autozoom, bool force_full_refine,
                                   const Forward& forward, PredictionLog* log) {
    if (st.interactions.channels != spec.interaction_channels || st.shape != st.interactions.shape)
        return internalError("interactive session state does not match its model");
    if (st.target.size() != static_cast<size_t>(voxelCount(st.shape)))
        return internalError("interactive session has no target of the image's size");
    zoom = std::min(spec.max_zoom, zoom);
    const int64_t np = voxelCount(spec.patch);
    std::vector<uint8_t> pred;

    // The network input buffer is kept per thread between predictions: a patch-sized input is
    // tens of MB, and fresh pages cost more than filling them.
    static thread_local std::vector<float> scratch;
    std::vector<float> input = std::move(scratch);
    struct Return {
        std::vector<float>& from;
        ~Return() { scratch = std::move(from); }
    } give_back{input};
    NetworkInput in = buildNetworkInput(st, spec, center, zoom, input);
    const auto run = [&]() -> Status {
        if (log) log->forwards.push_back({zoom, in.scaled_box});
        if (Status s = forward(input, pred); !s) return s;
        if (pred.size() != static_cast<size_t>(np))
            return internalError("the network returned a prediction of the wrong size");
        return Status::ok();
    };
    if (Status s = run(); !s) return s;
    bool changed = borderChanged(pred, in.previous, spec.patch);
    while (changed && autozoom) {
        if (zoom >= spec.max_zoom) break;
        zoom = std::min(spec.max_zoom, zoom * spec.zoom_growth);
        in = buildNetworkInput(st, spec, center, zoom, input);
        if (Status s = run(); !s) return s;
        changed = borderChanged(pred, in.previous, spec.patch);
    }

    Box last_paste;
    if (zoom == 1.0) {
        if (const auto region = clipBox(in.scaled_box, st.shape); region && st.before_write) {
            st.before_write(spec.prev_seg, *region);
            st.before_write(-1, *region);
        }
        pasteInto(pred.data(), in.scaled_box, st.interactions.channel(spec.prev_seg), st.shape,
                  [](uint8_t v) { return v ? kHalfOne : uint16_t{0}; });
        pasteInto(pred.data(), in.scaled_box, st.target.data(), st.shape,
                  [](uint8_t v) { return v; });
        last_paste = in.scaled_box;
    } else {
        if (in.scaled != spec.patch) {
            std::vector<float> f(pred.begin(), pred.end());
            const auto up = resizeTrilinear(f.data(), spec.patch, in.scaled);
            pred.resize(up.size());
            for (size_t i = 0; i < up.size(); ++i) pred[i] = up[i] >= 0.5f;
        }
        const auto boxes = planRefinement(st, spec, pred, in.scaled_box, force_full_refine, center);
        if (log) log->refinement_boxes = boxes;
        if (Status s = refineCoarse(st, spec, boxes, pred, in.scaled_box, forward, log); !s)
            return s;
        last_paste = boxes.front();
        for (const Box& b : boxes) last_paste = *unionBoxes(last_paste, b);
    }
    Box clipped = last_paste;
    for (int d = 0; d < 3; ++d) {
        clipped.lo[d] = std::max<int64_t>(clipped.lo[d], 0);
        clipped.hi[d] = std::min<int64_t>(clipped.hi[d], st.shape[d]);
    }
    if (log) log->paste_box = clipped;
    return std::optional<Box>(clipped);
}

}  // namespace voxseg::edit::interactive
