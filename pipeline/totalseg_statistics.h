// TotalSegmentator's own statistics file (`--outputs ts-stats`, statistics_totalsegmentator.json):
// what TotalSegmentator 2.18.0's `--statistics` writes, i.e. statistics.py get_basic_statistics
// with the defaults python_api.py uses when not --fast (exclude_masks_at_border, metric "mean",
// no intensity normalisation), on the full-resolution label map and the original image:
//
//   {"<name>": {"volume": <mm3>, "intensity": <mean>}, ...}   one entry per label, value order
//
//   - a label with a voxel in the first or last 3 slices along any axis (touches_border) gets
//     volume 0.0 and intensity 0.0, as does a label with no voxels;
//   - volume = voxels * (s0 * s1 * s2), the spacings multiplied in float32 in axis order (nibabel's
//     header zooms are float32; their product stays float32), the count times it in float64;
//   - intensity = the mean of the image's values cast to int16 as numpy's astype(np.int16) does on
//     x86-64 (truncated toward zero, wrapped modulo 2^16, 0 outside the int32 range or NaN),
//     rounded as numpy's round(5) (rint(x * 1e5) / 1e5).
//
// The image values are taken as voxseg loaded them (a float32 volume is exact; an integer one
// with a NIfTI scl_slope is scaled by the loader, which can differ from nibabel's float64 scaling
// in the last bit). Pure functions; thread-safe.
#pragma once

#include "core/label_info.h"
#include "core/status.h"
#include "core/volume.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::pipeline {

struct TotalSegLabelStatistics {
    int value = 0;
    std::string name;
    int64_t voxels = 0;           // every voxel of the label, border or not
    bool touches_border = false;  // TotalSegmentator's touches_border
    double volume_mm3 = 0.0;      // 0 when touches_border
    double intensity = 0.0;       // 0 when touches_border or no voxels
};

// numpy's float64 -> int16 cast (ndarray.astype(np.int16)) on x86-64.
int16_t numpyInt16(double x);
// numpy's round(x, 5) of a float64.
double numpyRound5(double x);
// TotalSegmentator's touches_border for a label whose voxels span the inclusive index box
// [lo, hi] of a volume of `size` voxels (an empty label: false).
bool touchesBorder(const std::array<int64_t, 3>& lo, const std::array<int64_t, 3>& hi,
                   const std::array<int64_t, 3>& size, int64_t voxels);

// One entry per label of `labels` other than 0, in value order; other values in the label map are
// ignored. `image` must be on the label map's grid.
// `exclude_at_border` false: TotalSegmentator's --stats_include_incomplete (labels touching the
// border are measured too; touches_border is still reported).
Result<std::vector<TotalSegLabelStatistics>> computeTotalSegStatistics(
    const Volume& label_map, const Volume& image, const std::vector<LabelInfo>& labels,
    bool exclude_at_border = true);

// json.dump(stats, indent=4) as Python writes it (ASCII, floats as Python's repr would read).
std::string totalSegStatisticsToJson(const std::vector<TotalSegLabelStatistics>& stats);

}  // namespace voxseg::pipeline
