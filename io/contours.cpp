#include "io/contours.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <thread>

namespace voxseg::io {

namespace {

// Marching squares cell: corners a (x, y), b (x+1, y), c (x+1, y+1), d (x, y+1) as mask bits
// 0..3; edges e0 = a-b, e1 = b-c, e2 = d-c, e3 = a-d. A segment runs from one edge's midpoint to
// another's with the label on its left.
struct CellSegments {
    int count = 0;
    std::array<std::array<int, 2>, 2> seg{};  // {from edge, to edge}
};

struct CellTable {
    std::array<CellSegments, 16> cases;
    CellTable() {
        constexpr double corner[4][2] = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
        constexpr double mid[4][2] = {{0.5, 0}, {1, 0.5}, {0.5, 1}, {0, 0.5}};
        constexpr int ends[4][2] = {{0, 1}, {1, 2}, {3, 2}, {0, 3}};  // corners of each edge
        for (int m = 0; m < 16; ++m) {
            const auto in = [m](int k) { return (m >> k) & 1; };
            std::vector<std::array<int, 2>> pairs;
            if (m == 5) {  // a, c inside: 8-connected, cut off the outside corners b and d
                pairs = {{0, 1}, {2, 3}};
            } else if (m == 10) {  // b, d inside: cut off a and c
                pairs = {{3, 0}, {1, 2}};
            } else {
                std::vector<int> crossing;
                for (int e = 0; e < 4; ++e)
                    if (in(ends[e][0]) != in(ends[e][1])) crossing.push_back(e);
                if (crossing.size() == 2) pairs = {{crossing[0], crossing[1]}};
            }
            CellSegments& cs = cases[static_cast<size_t>(m)];
            for (auto [p, q] : pairs) {
                // Corner shared by both edges (the corner the segment cuts off), if any.
                int shared = -1;
                for (int u : ends[p])
                    for (int v : ends[q])
                        if (u == v) shared = u;
                int probe = shared;
                if (probe < 0)
                    for (int k = 0; k < 4; ++k)
                        if (in(k)) probe = k;
                const double vx = mid[q][0] - mid[p][0], vy = mid[q][1] - mid[p][1];
                const double side = vx * (corner[probe][1] - mid[p][1]) -
                                    vy * (corner[probe][0] - mid[p][0]);  // > 0: probe on left
                const bool probe_inside = in(probe);
                const bool keep = (side > 0) == probe_inside;
                cs.seg[static_cast<size_t>(cs.count++)] =
                    keep ? std::array<int, 2>{p, q} : std::array<int, 2>{q, p};
            }
        }
    }
};

const CellTable& cellTable() {
    static const CellTable table;
    return table;
}

// Scratch buffers of one thread, reused across labels and planes.
struct Scratch {
    std::vector<uint8_t> mask;
    std::vector<int32_t> next;
    std::vector<int32_t> starts;
    std::vector<int32_t> loop;
};

struct Box {
    int x0 = 0, y0 = 0, x1 = -1, y1 = -1;  // inclusive
    bool empty() const { return x1 < x0; }
    void add(int x, int y) {
        if (empty()) {
            x0 = x1 = x;
            y0 = y1 = y;
            return;
        }
        x0 = std::min(x0, x);
        x1 = std::max(x1, x);
        y0 = std::min(y0, y);
        y1 = std::max(y1, y);
    }
};

template <typename T>
std::vector<PlanarContour> contoursInBox(const T* plane, int columns, T label, const Box& box,
                                         Scratch& s) {
    // Local window: the box plus one background pixel on every side.
    const int w = box.x1 - box.x0 + 3, h = box.y1 - box.y0 + 3;
    s.mask.assign(static_cast<size_t>(w) * h, 0);
    for (int y = box.y0; y <= box.y1; ++y) {
        const T* row = plane + static_cast<int64_t>(y) * columns;
        uint8_t* out = s.mask.data() + static_cast<size_t>(y - box.y0 + 1) * w + 1;
        for (int x = box.x0; x <= box.x1; ++x) out[x - box.x0] = row[x] == label;
    }
    // Edge midpoint ids: horizontal edge (x, y)-(x+1, y) = 2 (y w + x), vertical (x, y)-(x, y+1)
    // = 2 (y w + x) + 1.
    s.next.assign(static_cast<size_t>(2) * w * h, -1);
    s.starts.clear();
    const CellTable& table = cellTable();
    for (int cy = 0; cy + 1 < h; ++cy) {
        const uint8_t* r0 = s.mask.data() + static_cast<size_t>(cy) * w;
        const uint8_t* r1 = r0 + w;
        for (int cx = 0; cx + 1 < w; ++cx) {
            const int m = r0[cx] | (r0[cx + 1] << 1) | (r1[cx + 1] << 2) | (r1[cx] << 3);
            if (m == 0 || m == 15) continue;
            const int32_t base = 2 * (cy * w + cx);
            const int32_t edge_id[4] = {base, 2 * (cy * w + cx + 1) + 1, 2 * ((cy + 1) * w + cx),
                                        base + 1};
            const CellSegments& cs = table.cases[static_cast<size_t>(m)];
            for (int i = 0; i < cs.count; ++i) {
                const int32_t from = edge_id[cs.seg[static_cast<size_t>(i)][0]];
                s.next[static_cast<size_t>(from)] = edge_id[cs.seg[static_cast<size_t>(i)][1]];
                s.starts.push_back(from);
            }
        }
    }

    std::vector<PlanarContour> out;
    // Doubled integer coordinates of a midpoint (exact collinearity tests).
    const auto coords = [w](int32_t id) {
        const int32_t cell = id >> 1;
        const int x = cell % w, y = cell / w;
        return (id & 1) ? std::array<int64_t, 2>{2 * x, 2 * y + 1}
                        : std::array<int64_t, 2>{2 * x + 1, 2 * y};
    };
    for (int32_t start : s.starts) {
        if (s.next[static_cast<size_t>(start)] < 0) continue;  // already on a traced loop
        s.loop.clear();
        int32_t cur = start;
        do {
            s.loop.push_back(cur);
            const int32_t n = s.next[static_cast<size_t>(cur)];
            s.next[static_cast<size_t>(cur)] = -1;
            cur = n;
        } while (cur != start && cur >= 0);
        const size_t n = s.loop.size();
        PlanarContour contour;
        int64_t area2 = 0;  // 4x the doubled-coordinate shoelace sum sign is what matters
        for (size_t i = 0; i < n; ++i) {
            const auto p = coords(s.loop[(i + n - 1) % n]);
            const auto q = coords(s.loop[i]);
            const auto r = coords(s.loop[(i + 1) % n]);
            area2 += q[0] * r[1] - r[0] * q[1];
            const int64_t turn = (q[0] - p[0]) * (r[1] - q[1]) - (q[1] - p[1]) * (r[0] - q[0]);
            if (turn == 0) continue;  // collinear: merged
            contour.points.push_back({box.x0 - 1 + q[0] * 0.5, box.y0 - 1 + q[1] * 0.5});
        }
        contour.hole = area2 < 0;
        out.push_back(std::move(contour));
    }
    return out;
}

template <typename T>
std::vector<LabelContours> planeContours(const T* plane, int columns, int rows, Scratch& s,
                                         std::vector<Box>& boxes) {
    std::vector<int> present;
    for (int y = 0; y < rows; ++y) {
        const T* row = plane + static_cast<int64_t>(y) * columns;
        for (int x = 0; x < columns; ++x) {
            const T v = row[x];
            if (v == T(0)) continue;
            if (boxes.size() <= v) boxes.resize(static_cast<size_t>(v) + 1);
            Box& b = boxes[v];
            if (b.empty()) present.push_back(v);
            b.add(x, y);
        }
    }
    std::sort(present.begin(), present.end());
    std::vector<LabelContours> out;
    for (int v : present) {
        out.push_back({v, contoursInBox(plane, columns, static_cast<T>(v),
                                        boxes[static_cast<size_t>(v)], s)});
        boxes[static_cast<size_t>(v)] = Box{};
    }
    return out;
}

template <typename T>
std::vector<std::vector<LabelContours>> volumeContours(const T* data, const Geometry& g,
                                                       int threads) {
    const int columns = static_cast<int>(g.size[0]), rows = static_cast<int>(g.size[1]);
    const auto planes = static_cast<size_t>(g.size[2]);
    std::vector<std::vector<LabelContours>> out(planes);
    const int64_t plane_size = g.size[0] * g.size[1];
    int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    n = std::clamp(n, 1, static_cast<int>(std::max<size_t>(planes, 1)));
    std::atomic<size_t> next{0};
    const auto work = [&] {
        Scratch s;
        std::vector<Box> boxes;
        for (size_t k = next++; k < planes; k = next++)
            out[k] =
                planeContours(data + static_cast<int64_t>(k) * plane_size, columns, rows, s, boxes);
    };
    if (n == 1) {
        work();
        return out;
    }
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) pool.emplace_back(work);
    for (std::thread& t : pool) t.join();
    return out;
}

}  // namespace

double signedArea(const std::vector<ContourPoint>& points) {
    double sum = 0;
    const size_t n = points.size();
    for (size_t i = 0; i < n; ++i) {
        const ContourPoint& p = points[i];
        const ContourPoint& q = points[(i + 1) % n];
        sum += p.x * q.y - q.x * p.y;
    }
    return 0.5 * sum;
}

template <typename T>
std::vector<PlanarContour> extractContours(const T* plane, int columns, int rows, T label) {
    Box box;
    for (int y = 0; y < rows; ++y) {
        const T* row = plane + static_cast<int64_t>(y) * columns;
        for (int x = 0; x < columns; ++x)
            if (row[x] == label) box.add(x, y);
    }
    if (box.empty()) return {};
    Scratch s;
    return contoursInBox(plane, columns, label, box, s);
}

template <typename T>
std::vector<LabelContours> extractPlaneContours(const T* plane, int columns, int rows) {
    Scratch s;
    std::vector<Box> boxes;
    return planeContours(plane, columns, rows, s, boxes);
}

template std::vector<PlanarContour> extractContours<uint8_t>(const uint8_t*, int, int, uint8_t);
template std::vector<PlanarContour> extractContours<uint16_t>(const uint16_t*, int, int, uint16_t);
template std::vector<LabelContours> extractPlaneContours<uint8_t>(const uint8_t*, int, int);
template std::vector<LabelContours> extractPlaneContours<uint16_t>(const uint16_t*, int, int);

std::vector<std::vector<LabelContours>> extractVolumeContours(const Volume& labels, int threads) {
    if (labels.empty()) return {};
    const Geometry g = labels.geometry();
    if (const uint8_t* d = labels.data<uint8_t>()) return volumeContours(d, g, threads);
    if (const uint16_t* d = labels.data<uint16_t>()) return volumeContours(d, g, threads);
    return {};
}

std::vector<PixelSpan> rasterizeContours(const std::vector<PlanarContour>& contours, int columns,
                                         int rows) {
    // Crossings (row, first pixel right of the crossing), paired up per row after sorting.
    std::vector<std::pair<int, int>> crossings;
    const auto clampIndex = [](double v, int lo, int hi) {
        if (!(v > lo)) return lo;  // also NaN
        if (v >= hi) return hi;
        return static_cast<int>(v);
    };
    for (const PlanarContour& c : contours) {
        const size_t n = c.points.size();
        if (n < 3) continue;
        for (size_t i = 0; i < n; ++i) {
            const ContourPoint& p = c.points[i];
            const ContourPoint& q = c.points[(i + 1) % n];
            if (!std::isfinite(p.x) || !std::isfinite(p.y) || !std::isfinite(q.x) ||
                !std::isfinite(q.y) || p.y == q.y)
                continue;
            const double ylo = std::min(p.y, q.y), yhi = std::max(p.y, q.y);
            // Rows r with ylo <= r < yhi.
            const int r0 = clampIndex(std::ceil(ylo), 0, rows);
            const int r1 = clampIndex(std::ceil(yhi), 0, rows);
            const double slope = (q.x - p.x) / (q.y - p.y);
            for (int r = r0; r < r1; ++r) {
                const double x = p.x + (r - p.y) * slope;
                crossings.emplace_back(r, clampIndex(std::ceil(x), 0, columns));
            }
        }
    }
    std::sort(crossings.begin(), crossings.end());
    std::vector<PixelSpan> spans;
    for (size_t i = 0; i + 1 < crossings.size();) {
        if (crossings[i].first != crossings[i + 1].first) {  // odd count: cannot happen when
            ++i;                                             // closed; skip defensively
            continue;
        }
        const int row = crossings[i].first, begin = crossings[i].second,
                  end = crossings[i + 1].second;
        if (end > begin) {
            if (!spans.empty() && spans.back().row == row && spans.back().end == begin)
                spans.back().end = end;  // touching spans of two polygons
            else
                spans.push_back({row, begin, end});
        }
        i += 2;
    }
    return spans;
}

std::vector<uint8_t> rasterizeContoursToMask(const std::vector<PlanarContour>& contours,
                                             int columns, int rows) {
    std::vector<uint8_t> mask(static_cast<size_t>(columns) * static_cast<size_t>(rows), 0);
    for (const PixelSpan& s : rasterizeContours(contours, columns, rows))
        std::fill(mask.begin() + static_cast<int64_t>(s.row) * columns + s.begin,
                  mask.begin() + static_cast<int64_t>(s.row) * columns + s.end, 1);
    return mask;
}

}  // namespace voxseg::io
