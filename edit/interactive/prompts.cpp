#include "edit/interactive/prompts.h"

#include "engine/graph/tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace voxseg::edit::interactive {

namespace {

constexpr double kFp16Max = 65504.0;

int64_t voxelIndex(Index3 shape, int64_t z, int64_t y, int64_t x) {
    return (z * shape[1] + y) * shape[2] + x;
}

bool emptyBox(const Box& b) {
    return b.hi[0] <= b.lo[0] || b.hi[1] <= b.lo[1] || b.hi[2] <= b.lo[2];
}

void beforeWrite(SessionState& state, int channel, const Box& region) {
    if (state.before_write && !emptyBox(region)) state.before_write(channel, region);
}

std::string boxText(const BoxRequest& b) {
    return fmt::format("[[{}, {}], [{}, {}], [{}, {}]]", b.lo[0], b.hi[0], b.lo[1], b.hi[1],
                       b.lo[2], b.hi[2]);
}

bool supports(const InteractiveSpec& spec, const std::string& name) {
    auto it = spec.supported.find(name);
    return it != spec.supported.end() && it->second;
}

}  // namespace

uint16_t halfFromDoubleTorch(double v) { return engine::floatToHalf(static_cast<float>(v)); }

uint16_t halfFromDoubleNumpy(double v) {
    uint64_t x;
    std::memcpy(&x, &v, 8);
    const auto sign = static_cast<uint16_t>((x >> 48) & 0x8000u);
    uint64_t mant = x & ((uint64_t{1} << 52) - 1);
    const int64_t exp = static_cast<int64_t>((x >> 52) & 0x7ffu);
    if (exp == 0x7ff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    const int64_t e = exp - 1023 + 15;
    if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return sign;
        mant |= uint64_t{1} << 52;
        const auto shift = static_cast<uint64_t>(43 - e);
        uint64_t h = mant >> shift;
        const uint64_t rem = mant & ((uint64_t{1} << shift) - 1);
        const uint64_t half = uint64_t{1} << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    uint64_t h = (static_cast<uint64_t>(e) << 10) | (mant >> 42);
    const uint64_t rem = mant & ((uint64_t{1} << 42) - 1);
    const uint64_t half = uint64_t{1} << 41;
    if (rem > half || (rem == half && (h & 1u))) ++h;  // a carry into the exponent is correct
    return static_cast<uint16_t>(sign | h);
}

float halfValue(uint16_t bits) { return engine::halfToFloat(bits); }

Status prepareNewInteractionIntensity(SessionState& state, const InteractiveSpec& spec) {
    const double decay = spec.interaction_decay;
    if (!(decay > 0.0 && decay <= 1.0))
        return invalidArgument(fmt::format("interaction_decay must be in (0, 1], got {}", decay));
    if (decay == 1.0) return Status::ok();
    state.intensity *= 1.0 / decay;
    if (state.intensity <= kFp16Max) return Status::ok();
    const double target = kFp16Max / 10.0;
    const auto scale = static_cast<float>(target / state.intensity);
    const Box whole{{0, 0, 0}, state.shape};
    const int64_t n = state.interactions.voxels();
    for (int c = 0; c < state.interactions.channels; ++c) {
        if (c == spec.prev_seg) continue;
        beforeWrite(state, c, whole);
        uint16_t* bits = state.interactions.channel(c);
        for (int64_t i = 0; i < n; ++i)
            bits[i] = engine::floatToHalf(engine::halfToFloat(bits[i]) * scale);
    }
    state.intensity = target;
    return Status::ok();
}

Result<PointKernel> pointKernel(double radius) {
    if (!(radius >= 0.0) || radius != std::floor(radius) || radius > 64.0)
        return unsupported(fmt::format(
            "point_radius {} is not supported: voxseg draws points for whole radii 0..64 (2.6.0 "
            "resizes the ball for other radii)",
            radius));
    const auto r = static_cast<int64_t>(radius);
    PointKernel k;
    k.size = 2 * r + 1;
    const int64_t s = k.size;
    std::vector<uint8_t> ball(static_cast<size_t>(s * s * s));
    std::vector<Index3> zeros;
    for (int64_t z = 0; z < s; ++z)
        for (int64_t y = 0; y < s; ++y)
            for (int64_t x = 0; x < s; ++x) {
                const int64_t d2 = (z - r) * (z - r) + (y - r) * (y - r) + (x - r) * (x - r);
                const bool in = d2 <= r * r;
                ball[static_cast<size_t>((z * s + y) * s + x)] = in;
                if (!in) zeros.push_back({z, y, x});
            }
    // scipy's distance_transform_edt: the distance of each nonzero voxel to the nearest zero one
    // of the array (sqrt of an integer, correctly rounded either way). A ball with no zero voxel
    // (radius 0) keeps scipy's answer for an array without background: 2.6.0 never builds one.
    k.values.assign(ball.size(), 0.0);
    double max_value = 0.0;
    for (int64_t z = 0; z < s; ++z)
        for (int64_t y = 0; y < s; ++y)
            for (int64_t x = 0; x < s; ++x) {
                const auto i = static_cast<size_t>((z * s + y) * s + x);
                if (!ball[i]) continue;
                int64_t best = std::numeric_limits<int64_t>::max();
                for (const Index3& o : zeros) {
                    const int64_t d2 =
                        (z - o[0]) * (z - o[0]) + (y - o[1]) * (y - o[1]) + (x - o[2]) * (x - o[2]);
                    best = std::min(best, d2);
                }
                k.values[i] = zeros.empty() ? 1.0 : std::sqrt(static_cast<double>(best));
                max_value = std::max(max_value, k.values[i]);
            }
    if (max_value > 0.0)
        for (double& v : k.values) v /= max_value;
    return k;
}

void placePoint(SessionState& state, int channel, Index3 center, const PointKernel& kernel) {
    const int64_t s = kernel.size;
    Box box;
    for (int a = 0; a < 3; ++a) {
        box.lo[a] = center[a] - s / 2;
        box.hi[a] = center[a] + s / 2 + s % 2;
    }
    Box clipped;
    for (int a = 0; a < 3; ++a) {
        clipped.lo[a] = std::max<int64_t>(0, box.lo[a]);
        clipped.hi[a] = std::min(state.shape[a], box.hi[a]);
    }
    if (emptyBox(clipped)) return;
    beforeWrite(state, channel, clipped);
    const bool scaled = state.intensity != 1.0;
    uint16_t* bits = state.interactions.channel(channel);
    for (int64_t z = clipped.lo[0]; z < clipped.hi[0]; ++z)
        for (int64_t y = clipped.lo[1]; y < clipped.hi[1]; ++y)
            for (int64_t x = clipped.lo[2]; x < clipped.hi[2]; ++x) {
                const int64_t kz = z - box.lo[0], ky = y - box.lo[1], kx = x - box.lo[2];
                double v = kernel.values[static_cast<size_t>((kz * s + ky) * s + kx)];
                if (scaled) v *= state.intensity;
                const uint16_t h = halfFromDoubleTorch(v);
                uint16_t& dst = bits[voxelIndex(state.shape, z, y, x)];
                if (engine::halfToFloat(h) > engine::halfToFloat(dst)) dst = h;
            }
}

QueuedWindow windowForPoint(Index3 center) { return {center, 1.0}; }

Result<std::string> boxKind(const BoxRequest& box, const InteractiveSpec& spec) {
    int size_one = 0;
    for (int a = 0; a < 3; ++a) {
        const double size = box.hi[a] - box.lo[a];
        if (!std::isfinite(box.lo[a]) || !std::isfinite(box.hi[a]))
            return invalidArgument("box " + boxText(box) + " has a coordinate that is not finite");
        if (size == 0.0)
            return invalidArgument("box " + boxText(box) +
                                   " has size zero along an axis: give [lo, hi) with hi > lo (a "
                                   "box on one slice has size 1 there)");
        if (size < 0.0)
            return invalidArgument("box " + boxText(box) +
                                   " is reversed along an axis: give [lo, hi) with hi > lo");
        if (size == 1.0) ++size_one;
    }
    if (size_one == 0 && !supports(spec, "bbox3d"))
        return unsupported("box " + boxText(box) +
                           " is a 3-D box (no axis of size 1), which this model does not "
                           "support: draw the box on one slice");
    const std::string kind = size_one >= 1 && supports(spec, "bbox2d") ? "bbox2d" : "bbox3d";
    if (!supports(spec, kind))
        return unsupported("this model does not support " + kind + " prompts");
    return kind;
}

Box roundAndClipBox(const BoxRequest& request, Index3 shape) {
    Box b;
    for (int a = 0; a < 3; ++a) {
        int64_t lo = std::max<int64_t>(0, roundHalfEven(request.lo[a]));
        int64_t hi = std::min(shape[a], roundHalfEven(request.hi[a]));
        if (hi <= lo) {
            if (lo == 0)
                hi = std::min<int64_t>(1, shape[a]);
            else
                lo = std::max<int64_t>(lo - 1, 0);
        }
        b.lo[a] = lo;
        b.hi[a] = hi;
    }
    return b;
}

void writeBox(SessionState& state, int channel, const Box& box) {
    if (emptyBox(box)) return;
    beforeWrite(state, channel, box);
    const uint16_t h = halfFromDoubleTorch(state.intensity);
    uint16_t* bits = state.interactions.channel(channel);
    for (int64_t z = box.lo[0]; z < box.hi[0]; ++z)
        for (int64_t y = box.lo[1]; y < box.hi[1]; ++y) {
            uint16_t* row = bits + voxelIndex(state.shape, z, y, box.lo[2]);
            std::fill(row, row + (box.hi[2] - box.lo[2]), h);
        }
}

QueuedWindow windowForRegion(const Box& region, Index3 patch) {
    QueuedWindow w;
    double zoom = 1.0;
    for (int a = 0; a < 3; ++a) {
        w.center[a] = roundHalfEven(static_cast<double>(region.lo[a] + region.hi[a]) / 2.0);
        const int64_t size = region.hi[a] - region.lo[a];
        const int64_t requested = size + patch[a] / 3;
        zoom = std::max(zoom, static_cast<double>(requested) / static_cast<double>(patch[a]));
    }
    w.zoom = zoom;
    return w;
}

std::optional<Box> nonzeroBox(const uint8_t* mask, Index3 shape) {
    Box b{{shape[0], shape[1], shape[2]}, {0, 0, 0}};
    bool any = false;
    for (int64_t z = 0; z < shape[0]; ++z)
        for (int64_t y = 0; y < shape[1]; ++y) {
            const uint8_t* row = mask + voxelIndex(shape, z, y, 0);
            for (int64_t x = 0; x < shape[2]; ++x) {
                if (!row[x]) continue;
                any = true;
                b.lo = {std::min(b.lo[0], z), std::min(b.lo[1], y), std::min(b.lo[2], x)};
                b.hi = {std::max(b.hi[0], z + 1), std::max(b.hi[1], y + 1),
                        std::max(b.hi[2], x + 1)};
            }
        }
    if (!any) return std::nullopt;
    return b;
}

std::optional<Box> nonzeroBox(const std::vector<uint8_t>& mask, Index3 shape) {
    return nonzeroBox(mask.data(), shape);
}

void maxWriteMask(SessionState& state, int channel, const uint8_t* mask, const Box& mask_box,
                  const Box& region) {
    if (emptyBox(region)) return;
    beforeWrite(state, channel, region);
    const bool scaled = state.intensity != 1.0;
    const float factor = halfValue(halfFromDoubleNumpy(state.intensity));
    uint16_t lut[256];
    for (int v = 0; v < 256; ++v) {
        const uint16_t h = engine::floatToHalf(static_cast<float>(v));
        lut[v] = scaled ? engine::floatToHalf(halfValue(h) * factor) : h;
    }
    const Index3 local{mask_box.hi[0] - mask_box.lo[0], mask_box.hi[1] - mask_box.lo[1],
                       mask_box.hi[2] - mask_box.lo[2]};
    uint16_t* bits = state.interactions.channel(channel);
    for (int64_t z = region.lo[0]; z < region.hi[0]; ++z)
        for (int64_t y = region.lo[1]; y < region.hi[1]; ++y)
            for (int64_t x = region.lo[2]; x < region.hi[2]; ++x) {
                const int64_t i = voxelIndex(state.shape, z, y, x);
                const uint16_t h = lut[mask[voxelIndex(local, z - mask_box.lo[0],
                                                       y - mask_box.lo[1], x - mask_box.lo[2])]];
                if (halfValue(h) > halfValue(bits[i])) bits[i] = h;
            }
}

void writeMaskChannel(SessionState& state, int channel, const std::vector<uint8_t>& mask) {
    beforeWrite(state, channel, Box{{0, 0, 0}, state.shape});
    uint16_t* bits = state.interactions.channel(channel);
    for (size_t i = 0; i < mask.size(); ++i)
        bits[i] = engine::floatToHalf(static_cast<float>(mask[i]));
}

}  // namespace voxseg::edit::interactive
