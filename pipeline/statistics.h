// Per-label statistics of a label map: voxel count, volume in mL, intensity of the original
// image inside the label (mean, population std, min, max; HU on CT), index bounding box and
// centroid in patient coordinates (LPS mm, the mean of voxel centres), whether it touches the
// volume's border (JSON only). Written as statistics.json and statistics.csv through AtomicFile
// (never half-written).
// Plain functions; thread-safe.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"
#include "pipeline/labels.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::pipeline {

struct IntensityStatistics {
    double mean = 0.0;
    double std = 0.0;  // population (ddof = 0)
    double min = 0.0;
    double max = 0.0;
};

struct LabelStatistics {
    int label = 0;
    std::string name;
    int64_t voxels = 0;
    double volume_ml = 0.0;
    std::optional<IntensityStatistics> intensity;  // when an image was given and voxels > 0
    std::array<int64_t, 3> bbox_min{0, 0, 0};      // index (i, j, k), inclusive
    std::array<int64_t, 3> bbox_max{-1, -1, -1};   // inclusive; empty label: min > max
    Vec3 centroid_lps{0, 0, 0};                    // mm
    // A voxel in the first or last 3 slices along any axis: the structure may be cut off by the
    // field of view (TotalSegmentator's touches_border, pipeline/totalseg_statistics.h).
    bool touches_border = false;
    // The model's plausible range (model.json labels[i].plausible_volume_ml) and whether
    // volume_ml lies outside it (pipeline/input_checks.h); unset when the model states none.
    std::optional<std::array<double, 2>> plausible_volume_ml;
    bool implausible = false;
};

// A number derived from the label map that a model package declares (model.json
// "measurements", e.g. total intracranial volume "tiv_ml").
struct Measurement {
    std::string name;
    double value = 0.0;
    std::string unit;  // "mL"
    std::string description;
};

struct StatisticsReport {
    std::vector<LabelStatistics> labels;
    std::vector<Measurement> measurements;  // written as "measurements" when not empty
    std::string intensity_unit;             // "HU" for CT, "" when unknown
    Vec3 spacing{1, 1, 1};
    // What the run warned about (the input outside the model's intended input, implausible
    // volumes, ...), as in run.json; written as "warnings" (an empty list when none).
    std::vector<std::string> warnings;
};

// Every label listed in `labels` (also when absent: 0 voxels) plus any other nonzero value found.
// `intensity` (optional) must be on the label map's grid.
Result<StatisticsReport> computeStatistics(const Volume& label_map, const Volume* intensity,
                                           const std::vector<LabelInfo>& labels);

std::string statisticsToJson(const StatisticsReport& report);
std::string statisticsToCsv(const StatisticsReport& report);
Status writeStatisticsJson(const StatisticsReport& report, const std::string& path);
Status writeStatisticsCsv(const StatisticsReport& report, const std::string& path);

}  // namespace voxseg::pipeline
