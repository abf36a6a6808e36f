// loadSeries(): decoding a SeriesCandidate into a Volume (pixels through DicomPixelReader,
// rescale per slice, irregular stacks resampled by dicom_resample).
#include "core/log.h"
#include "core/memory_limit.h"
#include "io/dicom_pixels.h"
#include "io/dicom_resample.h"
#include "io/dicom_series.h"

#include <fmt/format.h>
#include <itkMacro.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

namespace voxseg::io {

namespace {

constexpr const char* kLog = "io.dicom";

std::string seriesName(const SeriesCandidate& c) {
    std::string uid = c.series_uid.empty() ? "(no SeriesInstanceUID)" : c.series_uid;
    return fmt::format("series {} [{}]", uid, c.index);
}

bool isIntegral(double v) { return std::isfinite(v) && v == std::round(v); }

// Value transform of one slice: out = stored * scale + offset.
struct Rescale {
    double scale = 1;
    double offset = 0;
};

Rescale rescaleOf(const SliceRef& s, bool philips_precise) {
    if (philips_precise && s.philips_scale_slope != 0) {
        // Philips: FP = DV / (RS * SS) with DV = SV * RS + RI (dcm2niix, nibabel).
        return {1.0 / s.philips_scale_slope, s.intercept / (s.slope * s.philips_scale_slope)};
    }
    return {s.slope, s.intercept};
}

// Decodes every slice into `write(k, values)`, one file per task, files in parallel.
template <typename Write>
Status decodeSlices(const SeriesCandidate& c, int threads, const Progress& progress,
                    Write&& write) {
    const int64_t cols = c.geometry.size[0];
    const int64_t rows = c.geometry.size[1];
    const int across = std::max(1, c.mosaic_tiles_across);
    std::map<std::string, std::vector<size_t>> by_file;
    for (size_t k = 0; k < c.slices.size(); ++k) by_file[c.slices[k].path].push_back(k);
    std::vector<const std::pair<const std::string, std::vector<size_t>>*> files;
    for (const auto& entry : by_file) files.push_back(&entry);

    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    std::atomic<bool> failed{false};
    Status first_error;
    std::mutex mutex;
    auto fail = [&](Status st) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failed.exchange(true)) first_error = std::move(st);
    };
    auto worker = [&] {
        std::vector<int32_t> frame;
        std::vector<int32_t> tile;
        for (size_t f = next++; f < files.size() && !failed; f = next++) {
            if (progress.isCancelled()) return fail(progress.checkCancelled());
            const std::string& path = files[f]->first;
            auto reader = DicomPixelReader::open(path);
            if (!reader.isOk()) return fail(reader.status());
            const PixelFormat& fmt = reader->format();
            if (fmt.rows != rows * across || fmt.columns != cols * across)
                return fail(
                    corruptData(fmt::format("pixel data is {}x{}, the header scan said {}x{}",
                                            fmt.columns, fmt.rows, cols * across, rows * across),
                                path));
            frame.resize(static_cast<size_t>(fmt.rows * fmt.columns));
            int64_t loaded_frame = -1;
            for (size_t k : files[f]->second) {
                const SliceRef& s = c.slices[k];
                if (s.frame != loaded_frame) {
                    if (s.frame >= fmt.frames)
                        return fail(corruptData(
                            fmt::format("frame {} missing ({} frames)", s.frame, fmt.frames),
                            path));
                    Status st = reader->readFrame(s.frame, frame);
                    if (!st.isOk()) return fail(st);
                    loaded_frame = s.frame;
                }
                if (s.tile < 0) {
                    write(k, frame.data());
                    continue;
                }
                // Mosaic: tile t sits at (t % across, t / across) in the tiled image.
                tile.resize(static_cast<size_t>(rows * cols));
                const int64_t tx = s.tile % across, ty = s.tile / across;
                for (int64_t y = 0; y < rows; ++y) {
                    const int32_t* src =
                        frame.data() + ((ty * rows + y) * cols * across) + tx * cols;
                    std::copy(src, src + cols, tile.data() + y * cols);
                }
                write(k, tile.data());
            }
            progress.report(++done, files.size(), "decoding DICOM pixels");
        }
    };
    int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    n = std::max(1, std::min<int>(n, static_cast<int>(files.size())));
    std::vector<std::thread> pool;
    for (int t = 1; t < n; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
    return failed ? first_error : Status::ok();
}

// dst[i] = src[i] * scale + offset for integral scale/offset; false (dst unspecified) when a
// value falls outside int16. One pass that vectorises: the values are converted in wrapping 32-bit
// arithmetic while the slice's minimum and maximum are tracked. Arithmetic modulo 2^32 keeps the
// low 16 bits exact, so every converted value is right whenever the exact result fits int16; the
// map is monotonic, so the range check on the minimum and maximum decides that for every voxel.
bool rescaleToInt16(const int32_t* src, size_t n, const Rescale& r, int16_t* dst) {
    if (n == 0) return true;
    const int64_t scale = static_cast<int64_t>(r.scale);
    const int64_t offset = static_cast<int64_t>(r.offset);
    const auto s32 = static_cast<uint32_t>(scale);
    const auto o32 = static_cast<uint32_t>(offset);
    int32_t lo = std::numeric_limits<int32_t>::max();
    int32_t hi = std::numeric_limits<int32_t>::min();
    if (s32 == 1) {  // the usual CT case (slope 1): no multiply in the loop
        for (size_t i = 0; i < n; ++i) {
            lo = std::min(lo, src[i]);
            hi = std::max(hi, src[i]);
            dst[i] = static_cast<int16_t>(static_cast<uint32_t>(src[i]) + o32);
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            lo = std::min(lo, src[i]);
            hi = std::max(hi, src[i]);
            dst[i] = static_cast<int16_t>(static_cast<uint32_t>(src[i]) * s32 + o32);
        }
    }
    const int64_t a = lo * scale + offset;
    const int64_t b = hi * scale + offset;
    return std::min(a, b) >= -32768 && std::max(a, b) <= 32767;
}

// The stack's geometry for io/dicom_resample (without pixel data).
IrregularStack stackOf(const SeriesCandidate& c) {
    const Geometry& g = c.geometry;
    IrregularStack stack;
    stack.columns = static_cast<int>(g.size[0]);
    stack.rows = static_cast<int>(g.size[1]);
    for (const SliceRef& s : c.slices) stack.positions.push_back(s.position);
    stack.row_dir = g.axisDirection(0);
    stack.col_dir = g.axisDirection(1);
    stack.column_spacing = g.spacing[0];
    stack.row_spacing = g.spacing[1];
    return stack;
}

// The series (or its resampled grid) holds more voxels than `limit`: an error naming the first
// file, the claim and the limit, before anything is allocated.
Status checkVoxelLimit(const SeriesCandidate& c, int64_t columns, int64_t rows, int64_t slices,
                       int64_t limit, const char* verb) {
    const double voxels =
        static_cast<double>(columns) * static_cast<double>(rows) * static_cast<double>(slices);
    if (voxels <= static_cast<double>(limit)) return Status::ok();
    return unsupported(
        fmt::format("{} {} {} x {} x {} voxels ({:.2g}) > limit {:.2g}; raise --max-voxels if "
                    "this is real",
                    std::filesystem::path(c.slices.front().path).filename().string(), verb, columns,
                    rows, slices, voxels, static_cast<double>(limit)),
        seriesName(c));
}

// Within the voxel limit, what loading holds at its peak (`bytes`) must fit the memory this
// process may use (issue 35): Linux over-commits, so the allocation would succeed and the
// decoding be killed by the kernel (a cgroup's limit, a small machine).
Status checkFitsMemory(const SeriesCandidate& c, const Geometry& g, double bytes) {
    const uint64_t limit = memoryLimitBytes();
    if (limit == 0 || bytes <= static_cast<double>(limit)) return Status::ok();
    return Status(StatusCode::kOutOfMemory,
                  fmt::format("{} x {} x {} voxels take {:.1f} GiB to load, more than the {}: "
                              "refused before decoding; run it where more memory is free (a "
                              "larger machine, a higher container or ulimit -v limit)",
                              g.size[0], g.size[1], c.slices.size(), bytes / double(1 << 30),
                              describeMemoryLimit()),
                  seriesName(c));
}

Volume toInt16(const std::vector<float>& data, const Geometry& g, VolumeInfo info) {
    Volume v = Volume::allocateUninitialized<int16_t>(g, std::move(info));
    int16_t* out = v.data<int16_t>();
    for (size_t i = 0; i < data.size(); ++i) {
        float x = std::round(data[i]);
        out[i] = static_cast<int16_t>(std::clamp(x, -32768.0f, 32767.0f));
    }
    return v;
}

}  // namespace

namespace {

// ITK aborts on a geometry it cannot invert: a damaged header is refused here instead.
Status checkFinite(const Geometry& g, const char* what, const std::string& name) {
    if (g.isFinite()) return Status::ok();
    return corruptData(fmt::format("{} is not finite (spacing {} x {} x {} mm, origin {}, {}, "
                                   "{}): damaged position, orientation or spacing tags",
                                   what, g.spacing[0], g.spacing[1], g.spacing[2], g.origin[0],
                                   g.origin[1], g.origin[2]),
                       name);
}

Result<Volume> loadChecked(const SeriesCandidate& c, const DicomLoadOptions& options,
                           const Progress& progress) {
    const std::string name = seriesName(c);
    if (c.slices.empty()) return invalidArgument("volume has no slices", name);
    if (c.tilted && options.tilt == IrregularPolicy::kRefuse)
        return unsupported(fmt::format("gantry tilt of {:.2f} degrees; allow resampling to load "
                                       "it on a regular grid",
                                       c.tilt_degrees),
                           name);
    if (c.uneven_spacing && options.uneven_spacing == IrregularPolicy::kRefuse)
        return unsupported("slice spacing is not uniform; allow resampling to load it", name);
    if (c.has_gaps && !options.allow_gaps)
        return unsupported("slices are missing (gap in the stack); allow gaps to load it", name);

    const Geometry& g = c.geometry;
    VOXSEG_RETURN_IF_ERROR(checkFinite(g, "slice geometry", name));
    VOXSEG_RETURN_IF_ERROR(checkVoxelLimit(c, g.size[0], g.size[1],
                                           static_cast<int64_t>(c.slices.size()),
                                           options.max_voxels, "claims"));
    const size_t plane = static_cast<size_t>(g.size[0] * g.size[1]);
    std::vector<Rescale> rescale(c.slices.size());
    bool integral = true;
    for (size_t k = 0; k < c.slices.size(); ++k) {
        rescale[k] = rescaleOf(c.slices[k], options.philips_precise);
        integral = integral && isIntegral(rescale[k].scale) && isIntegral(rescale[k].offset);
    }
    const bool resample = c.has_patient_geometry && (c.tilted || c.uneven_spacing || c.has_gaps);
    const double voxels = static_cast<double>(plane) * static_cast<double>(c.slices.size());
    // Integral values: an int16 volume (2 bytes a voxel); else float32 values and the volume
    // made from them (8); resampled: the values, the regular grid's and its volume.
    double peak = integral && !resample ? 2 * voxels : 8 * voxels;
    if (resample) {
        const Geometry grid = regularGridFor(stackOf(c));
        VOXSEG_RETURN_IF_ERROR(checkFinite(grid, "the regular grid of its slices", name));
        VOXSEG_RETURN_IF_ERROR(checkVoxelLimit(c, grid.size[0], grid.size[1], grid.size[2],
                                               options.max_voxels, "resamples to"));
        peak = 4 * voxels + 8 * static_cast<double>(grid.voxelCount());
    }
    VOXSEG_RETURN_IF_ERROR(checkFitsMemory(c, g, peak));

    VolumeInfo info;
    info.modality = c.modality;
    info.series_uid = c.series_uid;
    info.series_description = c.description;
    info.source = std::filesystem::path(c.slices.front().path).parent_path().string();
    info.warnings = c.warnings;

    // Integral values go straight into int16 while they fit; anything else (or a value out of
    // range) goes through float32.
    if (integral && !resample) {
        // Every voxel is written below (each slice in full), or the volume is dropped.
        Volume v = Volume::allocateUninitialized<int16_t>(g, info);
        int16_t* out = v.data<int16_t>();
        std::atomic<bool> overflow{false};
        Status st = decodeSlices(c, options.threads, progress, [&](size_t k, const int32_t* src) {
            if (!rescaleToInt16(src, plane, rescale[k], out + k * plane)) overflow = true;
        });
        if (!st.isOk()) return st.withContext("loading " + name + ": ");
        if (!overflow) return v;
        log::debug(kLog, "{}: values exceed int16, loading as float32", name);
    }

    std::vector<float> values(plane * c.slices.size());
    Status st = decodeSlices(c, options.threads, progress, [&](size_t k, const int32_t* src) {
        float* dst = values.data() + k * plane;
        for (size_t i = 0; i < plane; ++i)
            dst[i] = static_cast<float>(src[i] * rescale[k].scale + rescale[k].offset);
    });
    if (!st.isOk()) return st.withContext("loading " + name + ": ");

    Geometry out_geometry = g;
    if (resample) {
        IrregularStack stack = stackOf(c);
        stack.data = values.data();
        auto resampled = resampleStack(stack, options.threads);
        if (!resampled.isOk()) return resampled.status().withContext("resampling " + name + ": ");
        out_geometry = resampled->geometry;
        std::string what = c.tilted ? fmt::format("gantry tilt {:.2f} deg", c.tilt_degrees) : "";
        if (c.uneven_spacing) what += std::string(what.empty() ? "" : ", ") + "uneven spacing";
        if (c.has_gaps) what += std::string(what.empty() ? "" : ", ") + "missing slices";
        std::string msg = fmt::format(
            "{}: resampled ({}) from {} slices to a regular {}x{}x{} grid, {:.4g}x{:.4g}x{:.4g} "
            "mm, acquired orientation kept, every acquired pixel inside",
            name, what, c.slices.size(), out_geometry.size[0], out_geometry.size[1],
            out_geometry.size[2], out_geometry.spacing[0], out_geometry.spacing[1],
            out_geometry.spacing[2]);
        if (resampled->filled > 0)
            msg += fmt::format("; {} voxels outside every slice set to {:g}", resampled->filled,
                               resampled->fill);
        log::warning(kLog, "{}", msg);
        info.warnings.push_back(msg);
        values = std::move(resampled->data);
    }
    if (integral) {
        float lo = values.empty() ? 0 : *std::min_element(values.begin(), values.end());
        float hi = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
        if (lo >= -32768.0f && hi <= 32767.0f) return toInt16(values, out_geometry, info);
    }
    Volume v = Volume::allocateUninitialized<float>(out_geometry, info);
    std::copy(values.begin(), values.end(), v.data<float>());
    return v;
}

}  // namespace

Result<Volume> loadSeries(const SeriesCandidate& c, const DicomLoadOptions& options,
                          const Progress& progress) {
    // Within the voxel limit, memory may still run out (ITK reports it as an exception).
    try {
        return loadChecked(c, options, progress);
    } catch (const std::bad_alloc&) {
    } catch (const itk::MemoryAllocationError&) {
    }
    const Geometry& g = c.geometry;
    return Status(StatusCode::kOutOfMemory,
                  fmt::format("not enough memory for {} x {} x {} voxels; free memory or load a "
                              "smaller series",
                              g.size[0], g.size[1], c.slices.size()),
                  seriesName(c));
}

}  // namespace voxseg::io
