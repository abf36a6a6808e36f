#include "io/acquired_labels.h"

#include "core/log.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

namespace voxseg::io {

namespace {

constexpr const char* kComponent = "io.acquired";

Vec3 add(const Vec3& a, const Vec3& b) { return {a[0] + b[0], a[1] + b[1], a[2] + b[2]}; }
Vec3 sub(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
Vec3 scale(const Vec3& a, double s) { return {a[0] * s, a[1] * s, a[2] * s}; }

// Runs fn(item) for items [0, count) on `threads` threads (0: all cores).
template <typename Fn>
void parallelItems(int64_t count, int threads, Fn&& fn) {
    const int n = std::max(
        1,
        std::min<int>(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()),
                      static_cast<int>(std::max<int64_t>(1, count))));
    std::atomic<int64_t> next{0};
    auto worker = [&] {
        for (int64_t i = next++; i < count; i = next++) fn(i);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < n; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
}

// True when `grid`'s planes are exactly the acquired slices (a series loaded without
// resampling): same matrix, orientation and spacing, slice k at grid plane k.
bool isAcquiredGrid(const Geometry& grid, const AcquiredPlanes& planes) {
    if (grid.size[0] != planes.columns || grid.size[1] != planes.rows ||
        grid.size[2] != static_cast<int64_t>(planes.planeCount()))
        return false;
    if (std::abs(grid.spacing[0] - planes.column_spacing) > 1e-5 * planes.column_spacing ||
        std::abs(grid.spacing[1] - planes.row_spacing) > 1e-5 * planes.row_spacing)
        return false;
    for (int a = 0; a < 3; ++a)
        if (std::abs(grid.axisDirection(0)[a] - planes.row_dir[a]) > 1e-5 ||
            std::abs(grid.axisDirection(1)[a] - planes.col_dir[a]) > 1e-5)
            return false;
    const double tolerance = std::max(1e-3, 0.05 * grid.spacing[2]);
    for (size_t k = 0; k < planes.planeCount(); ++k) {
        const Vec3 p = grid.indexToPhysical({0, 0, static_cast<double>(k)});
        const Vec3& q = planes.slices[k].position;
        if (std::hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]) > tolerance) return false;
    }
    return true;
}

template <typename T>
int64_t sampleOntoPlanes(const Volume& map, const AcquiredPlanes& planes, T* out, int threads) {
    const Geometry g = map.geometry();
    const T* src = map.data<T>();
    const int64_t cols = planes.columns, rows = planes.rows;
    // Continuous grid index of pixel (x, y) of plane k: base + x * dx + y * dy.
    const Vec3 dx = sub(g.physicalToIndex(scale(planes.row_dir, planes.column_spacing)),
                        g.physicalToIndex({0, 0, 0}));
    const Vec3 dy = sub(g.physicalToIndex(scale(planes.col_dir, planes.row_spacing)),
                        g.physicalToIndex({0, 0, 0}));
    std::atomic<int64_t> outside{0};
    parallelItems(static_cast<int64_t>(planes.planeCount()), threads, [&](int64_t k) {
        const Vec3 base = g.physicalToIndex(planes.slices[static_cast<size_t>(k)].position);
        T* dst = out + k * cols * rows;
        int64_t local_outside = 0;
        for (int64_t y = 0; y < rows; ++y)
            for (int64_t x = 0; x < cols; ++x) {
                int64_t idx[3];
                bool inside = true;
                for (int a = 0; a < 3; ++a) {
                    idx[a] = std::llround(base[a] + x * dx[a] + y * dy[a]);
                    inside &= idx[a] >= 0 && idx[a] < g.size[a];
                }
                if (!inside) {
                    ++local_outside;
                    dst[y * cols + x] = T(0);
                    continue;
                }
                dst[y * cols + x] = src[(idx[2] * g.size[1] + idx[1]) * g.size[0] + idx[0]];
            }
        outside += local_outside;
    });
    return outside;
}

template <typename T>
void sampleOntoGrid(const AcquiredLabels& acquired, const Geometry& g, T* out, int threads) {
    const AcquiredPlanes& planes = acquired.planes;
    const Vec3 n = [&] {
        const Vec3 c = cross(planes.row_dir, planes.col_dir);
        const double l = norm(c);
        return scale(c, 1.0 / l);
    }();
    const Vec3& p0 = planes.slices.front().position;
    std::vector<double> u;  // plane positions along the normal, ascending (SeriesCandidate order)
    for (const SliceRef& s : planes.slices) u.push_back(dot(sub(s.position, p0), n));
    const bool descending = u.size() > 1 && u.back() < u.front();
    std::vector<size_t> order(u.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = descending ? order.size() - 1 - i : i;
    std::vector<double> us;
    for (size_t i : order) us.push_back(u[i]);
    std::vector<double> steps;
    for (size_t i = 1; i < us.size(); ++i) steps.push_back(us[i] - us[i - 1]);
    double median = planes.slice_thickness > 0 ? planes.slice_thickness : 1.0;
    if (!steps.empty()) {
        std::vector<double> s = steps;
        std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
        median = s[s.size() / 2];
    }
    // How far a plane reaches along the normal on each side: half the step to its neighbour
    // (up to kMaxReach median steps: a wider gap is not filled), half a median step at the ends.
    constexpr double kMaxStepFilled = 3.0;
    auto reach = [&](size_t i, int side) {
        const size_t j = i + side;
        if (side < 0 ? i == 0 : j >= us.size()) return 0.5 * median;
        const double step = std::abs(us[j] - us[i]);
        return step <= kMaxStepFilled * median * (1 + 1e-6) ? 0.5 * step : 0.5 * median;
    };
    const int64_t cols = planes.columns, rows = planes.rows;
    parallelItems(g.size[2], threads, [&](int64_t k) {
        T* dst = out + k * g.size[0] * g.size[1];
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i) {
                const Vec3 w = g.indexToPhysical(
                    {static_cast<double>(i), static_cast<double>(j), static_cast<double>(k)});
                const Vec3 d = sub(w, p0);
                const double z = dot(d, n);
                size_t hi = std::upper_bound(us.begin(), us.end(), z) - us.begin();
                size_t best =
                    hi == 0
                        ? 0
                        : (hi == us.size() ? hi - 1 : (z - us[hi - 1] <= us[hi] - z ? hi - 1 : hi));
                const double off = z - us[best];
                T value = 0;
                if (std::abs(off) <= reach(best, off < 0 ? -1 : 1) + 1e-6 * median) {
                    const SliceRef& s = planes.slices[order[best]];
                    const Vec3 r = sub(w, s.position);
                    const int64_t x = std::llround(dot(r, planes.row_dir) / planes.column_spacing);
                    const int64_t y = std::llround(dot(r, planes.col_dir) / planes.row_spacing);
                    if (x >= 0 && x < cols && y >= 0 && y < rows)
                        value = acquired.plane<T>(order[best])[y * cols + x];
                }
                dst[j * g.size[0] + i] = value;
            }
    });
}

}  // namespace

AcquiredPlanes AcquiredPlanes::of(const SeriesCandidate& series) {
    AcquiredPlanes p;
    const Geometry& g = series.geometry;
    p.columns = static_cast<int>(g.size[0]);
    p.rows = static_cast<int>(g.size[1]);
    p.row_dir = g.axisDirection(0);
    p.col_dir = g.axisDirection(1);
    p.column_spacing = g.spacing[0];
    p.row_spacing = g.spacing[1];
    p.slice_thickness = g.spacing[2];
    p.slices = series.slices;
    return p;
}

Vec3 AcquiredPlanes::pixelToPhysical(size_t k, double x, double y) const {
    return add(slices[k].position,
               add(scale(row_dir, x * column_spacing), scale(col_dir, y * row_spacing)));
}

Result<AcquiredLabels> labelsOnAcquiredImages(const Volume& label_map,
                                              const SeriesCandidate& series, int threads) {
    const PixelType type = label_map.pixelType();
    if (label_map.empty() || (type != PixelType::kUInt8 && type != PixelType::kUInt16))
        return invalidArgument(
            "labels on the acquired images: the label map must be uint8 or "
            "uint16");
    if (series.slices.empty())
        return Status(StatusCode::kFailedPrecondition,
                      "labels on the acquired images need the source DICOM series",
                      series.series_uid);
    AcquiredLabels out;
    out.planes = AcquiredPlanes::of(series);
    if (!series.has_patient_geometry) {
        // No IPP/IOP: the series is a plain index grid, its slices are the grid's planes.
        if (label_map.geometry().size != series.geometry.size)
            return invalidArgument("the label map's grid is not the series' (no patient geometry)",
                                   series.series_uid);
        for (size_t k = 0; k < out.planes.slices.size(); ++k)
            out.planes.slices[k].position =
                label_map.geometry().indexToPhysical({0, 0, static_cast<double>(k)});
        out.labels = label_map;
        return out;
    }
    if (isAcquiredGrid(label_map.geometry(), out.planes)) {
        out.labels = label_map;
        return out;
    }
    out.resampled = true;
    Geometry nominal = series.geometry;
    nominal.size = {out.planes.columns, out.planes.rows,
                    static_cast<int64_t>(out.planes.planeCount())};
    int64_t outside = 0;
    if (type == PixelType::kUInt8) {
        out.labels = Volume::allocate<uint8_t>(nominal);
        outside = sampleOntoPlanes(label_map, out.planes, out.labels.data<uint8_t>(), threads);
    } else {
        out.labels = Volume::allocate<uint16_t>(nominal);
        outside = sampleOntoPlanes(label_map, out.planes, out.labels.data<uint16_t>(), threads);
    }
    if (outside > 0)
        log::warning(kComponent,
                     "series {}: {} acquired pixels lie outside the label map's grid and are "
                     "labelled background",
                     series.series_uid, outside);
    return out;
}

Result<Volume> labelsOnGrid(const AcquiredLabels& acquired, const Geometry& grid, int threads) {
    const PixelType type = acquired.labels.pixelType();
    if (acquired.labels.empty() || acquired.planes.slices.empty() ||
        (type != PixelType::kUInt8 && type != PixelType::kUInt16))
        return invalidArgument("labels on a grid: no uint8/uint16 labels on acquired planes");
    auto onGrid = [&](auto tag) {
        using T = decltype(tag);
        Volume v = Volume::allocate<T>(grid);
        if (isAcquiredGrid(grid, acquired.planes))  // plane k is grid plane k
            std::copy_n(acquired.labels.data<T>(), grid.voxelCount(), v.data<T>());
        else
            sampleOntoGrid(acquired, grid, v.data<T>(), threads);
        return v;
    };
    return type == PixelType::kUInt8 ? onGrid(uint8_t{}) : onGrid(uint16_t{});
}

}  // namespace voxseg::io
