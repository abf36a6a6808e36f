#include "edit/interactive/simulated_clicks.h"

#include "edit/interactive/interactive_session.h"

#include <algorithm>
#include <limits>

namespace voxseg::edit::interactive {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Felzenszwalb and Huttenlocher's 1-D squared distance transform of f (0 on background, inf
// inside) over n samples at stride `stride`, in place. Only finite samples are parabola sites; a
// line without one stays infinite. Scratch sized by the caller (v: n, z: n + 1).
void distance1d(double* f, int64_t n, int64_t stride, std::vector<double>& d,
                std::vector<int64_t>& v, std::vector<double>& z) {
    auto at = [&](int64_t q) { return f[q * stride]; };
    int64_t k = -1;
    for (int64_t q = 0; q < n; ++q) {
        if (at(q) == kInf) continue;
        double s = 0;
        while (k >= 0) {
            const int64_t p = v[static_cast<size_t>(k)];
            s = ((at(q) + double(q * q)) - (at(p) + double(p * p))) / double(2 * (q - p));
            if (s > z[static_cast<size_t>(k)]) break;
            --k;
        }
        ++k;
        v[static_cast<size_t>(k)] = q;
        z[static_cast<size_t>(k)] = k == 0 ? -kInf : s;
        z[static_cast<size_t>(k) + 1] = kInf;
    }
    if (k < 0) return;
    int64_t j = 0;
    for (int64_t q = 0; q < n; ++q) {
        while (z[static_cast<size_t>(j) + 1] < double(q)) ++j;
        const int64_t p = v[static_cast<size_t>(j)];
        d[static_cast<size_t>(q)] = double((q - p) * (q - p)) + at(p);
    }
    for (int64_t q = 0; q < n; ++q) f[q * stride] = d[static_cast<size_t>(q)];
}

// The largest 6-connected component of `mask` (the first found among equal sizes).
std::vector<uint8_t> largestComponent(const std::vector<uint8_t>& mask, Index3 n) {
    std::vector<int32_t> comp(mask.size(), 0);
    std::vector<int64_t> stack;
    int32_t best = 0, id = 0;
    int64_t best_size = 0;
    const int64_t sy = n[2], sz = n[1] * n[2];
    for (int64_t s = 0; s < static_cast<int64_t>(mask.size()); ++s) {
        if (!mask[static_cast<size_t>(s)] || comp[static_cast<size_t>(s)]) continue;
        ++id;
        int64_t size = 0;
        stack.assign(1, s);
        comp[static_cast<size_t>(s)] = id;
        while (!stack.empty()) {
            const int64_t i = stack.back();
            stack.pop_back();
            ++size;
            const int64_t z = i / sz, y = (i / sy) % n[1], x = i % sy;
            const int64_t nb[6][2] = {{z > 0, i - sz}, {z + 1 < n[0], i + sz},
                                      {y > 0, i - sy}, {y + 1 < n[1], i + sy},
                                      {x > 0, i - 1},  {x + 1 < n[2], i + 1}};
            for (const auto& [ok, j] : nb)
                if (ok && mask[static_cast<size_t>(j)] && !comp[static_cast<size_t>(j)]) {
                    comp[static_cast<size_t>(j)] = id;
                    stack.push_back(j);
                }
        }
        if (size > best_size) best = id, best_size = size;
    }
    std::vector<uint8_t> out(mask.size(), 0);
    for (size_t i = 0; i < mask.size(); ++i) out[i] = comp[i] == best && best != 0;
    return out;
}

}  // namespace

std::optional<Index3> deepestVoxel(const std::vector<uint8_t>& mask, Index3 shape) {
    // Squared distances on the mask padded by one voxel of background on every side.
    const Index3 p{shape[0] + 2, shape[1] + 2, shape[2] + 2};
    std::vector<double> f(static_cast<size_t>(p[0] * p[1] * p[2]), 0.0);
    bool any = false;
    for (int64_t z = 0; z < shape[0]; ++z)
        for (int64_t y = 0; y < shape[1]; ++y)
            for (int64_t x = 0; x < shape[2]; ++x)
                if (mask[static_cast<size_t>((z * shape[1] + y) * shape[2] + x)]) {
                    f[static_cast<size_t>(((z + 1) * p[1] + y + 1) * p[2] + x + 1)] = kInf;
                    any = true;
                }
    if (!any) return std::nullopt;
    const int64_t longest = std::max({p[0], p[1], p[2]});
    std::vector<double> d(static_cast<size_t>(longest));
    std::vector<int64_t> v(static_cast<size_t>(longest));
    std::vector<double> zs(static_cast<size_t>(longest) + 1);
    for (int64_t z = 0; z < p[0]; ++z)  // along x
        for (int64_t y = 0; y < p[1]; ++y)
            distance1d(&f[static_cast<size_t>((z * p[1] + y) * p[2])], p[2], 1, d, v, zs);
    for (int64_t z = 0; z < p[0]; ++z)  // along y
        for (int64_t x = 0; x < p[2]; ++x)
            distance1d(&f[static_cast<size_t>(z * p[1] * p[2] + x)], p[1], p[2], d, v, zs);
    for (int64_t y = 0; y < p[1]; ++y)  // along z
        for (int64_t x = 0; x < p[2]; ++x)
            distance1d(&f[static_cast<size_t>(y * p[2] + x)], p[0], p[1] * p[2], d, v, zs);
    double best = -1;
    Index3 at{};
    for (int64_t z = 0; z < shape[0]; ++z)
        for (int64_t y = 0; y < shape[1]; ++y)
            for (int64_t x = 0; x < shape[2]; ++x) {
                const double dist = f[static_cast<size_t>(((z + 1) * p[1] + y + 1) * p[2] + x + 1)];
                if (mask[static_cast<size_t>((z * shape[1] + y) * shape[2] + x)] && dist > best) {
                    best = dist;
                    at = {z, y, x};
                }
            }
    return at;
}

std::optional<SimulatedClick> correctiveClick(const std::vector<uint8_t>& prediction,
                                              const std::vector<uint8_t>& truth, Index3 shape) {
    std::vector<uint8_t> error(truth.size());
    bool any = false;
    for (size_t i = 0; i < truth.size(); ++i) {
        error[i] = (prediction[i] != 0) != (truth[i] != 0);
        any = any || error[i];
    }
    if (!any) return std::nullopt;
    const std::optional<Index3> at = deepestVoxel(largestComponent(error, shape), shape);
    if (!at) return std::nullopt;
    const auto i = static_cast<size_t>(((*at)[0] * shape[1] + (*at)[1]) * shape[2] + (*at)[2]);
    return SimulatedClick{*at, truth[i] != 0};
}

double diceScore(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    int64_t both = 0, sum = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        both += a[i] && b[i];
        sum += (a[i] != 0) + (b[i] != 0);
    }
    return sum == 0 ? 1.0 : 2.0 * double(both) / double(sum);
}

Result<SimulatedSession> simulateClicks(InteractiveSession& session,
                                        const std::vector<uint8_t>& truth, int clicks) {
    const Index3 n = session.shape();
    const std::optional<Index3> first = deepestVoxel(truth, n);
    if (!first) return invalidArgument("simulated clicks: the structure has no voxel");
    SimulatedSession out;
    std::optional<SimulatedClick> click = SimulatedClick{*first, true};
    for (int c = 0; c < clicks && click; ++c) {
        VOXSEG_RETURN_IF_ERROR(replayClicks(session, {*click}));
        out.clicks.push_back(*click);
        out.dice.push_back(diceScore(session.target(), truth));
        click = correctiveClick(session.target(), truth, n);
    }
    return out;
}

Status replayClicks(InteractiveSession& session, const std::vector<SimulatedClick>& clicks) {
    for (const SimulatedClick& c : clicks) {
        const Point3 p{double(c.voxel[0]), double(c.voxel[1]), double(c.voxel[2])};
        VOXSEG_RETURN_IF_ERROR(session.addPoint(p, c.include).status());
    }
    return Status::ok();
}

}  // namespace voxseg::edit::interactive
