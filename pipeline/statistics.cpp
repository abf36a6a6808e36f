#include "pipeline/statistics.h"

#include "core/atomic_file.h"
#include "pipeline/pixel_dispatch.h"
#include "pipeline/totalseg_statistics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace voxseg::pipeline {

namespace {

struct Accumulator {
    int64_t voxels = 0;
    std::array<int64_t, 3> lo{std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::max()};
    std::array<int64_t, 3> hi{-1, -1, -1};
    std::array<double, 3> index_sum{0, 0, 0};
    double sum_sq_dev = 0.0;
    double mean = 0.0;  // running (Welford)
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
};

template <typename L, typename I>
void accumulate(const Volume& label_map, const I* intensity, std::map<int, Accumulator>& acc) {
    const Geometry g = label_map.geometry();
    const L* lab = label_map.data<L>();
    int64_t idx = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i, ++idx) {
                const L value = lab[idx];
                if (value == L(0)) continue;
                Accumulator& a = acc[static_cast<int>(value)];
                ++a.voxels;
                const std::array<int64_t, 3> ijk{i, j, k};
                for (int d = 0; d < 3; ++d) {
                    a.lo[d] = std::min(a.lo[d], ijk[d]);
                    a.hi[d] = std::max(a.hi[d], ijk[d]);
                    a.index_sum[d] += static_cast<double>(ijk[d]);
                }
                if (intensity) {
                    const double x = static_cast<double>(intensity[idx]);
                    const double delta = x - a.mean;
                    a.mean += delta / static_cast<double>(a.voxels);
                    a.sum_sq_dev += delta * (x - a.mean);
                    a.min = std::min(a.min, x);
                    a.max = std::max(a.max, x);
                }
            }
}

std::string csvField(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

}  // namespace

Result<StatisticsReport> computeStatistics(const Volume& label_map, const Volume* intensity,
                                           const std::vector<LabelInfo>& labels) {
    if (label_map.empty()) return invalidArgument("statistics: empty label map");
    if (!isLabelPixelType(label_map.pixelType()))
        return invalidArgument(std::string("statistics need a uint8/uint16 label map, not ") +
                               pixelTypeName(label_map.pixelType()));
    const Geometry g = label_map.geometry();
    if (intensity && (intensity->empty() || !intensity->geometry().approxEqual(g)))
        return invalidArgument(
            "statistics: the intensity image is not on the label map's grid; pass the original "
            "image the label map was computed on",
            intensity ? intensity->info().source : std::string());

    std::map<int, Accumulator> acc;
    for (const LabelInfo& l : labels)
        if (l.value != 0) acc[l.value];
    withPixelType(label_map.pixelType(), [&](auto ltag) {
        using L = decltype(ltag);
        if constexpr (std::is_same_v<L, uint8_t> || std::is_same_v<L, uint16_t>) {
            if (!intensity) {
                accumulate<L, float>(label_map, nullptr, acc);
                return;
            }
            withPixelType(intensity->pixelType(), [&](auto itag) {
                using I = decltype(itag);
                accumulate<L, I>(label_map, intensity->data<I>(), acc);
            });
        }
    });

    StatisticsReport report;
    report.spacing = g.spacing;
    if (intensity && intensity->info().modality == "CT") report.intensity_unit = "HU";
    const double voxel_ml = g.spacing[0] * g.spacing[1] * g.spacing[2] / 1000.0;
    for (const auto& [value, a] : acc) {
        LabelStatistics s;
        s.label = value;
        s.name = labelName(labels, value);
        s.voxels = a.voxels;
        s.volume_ml = static_cast<double>(a.voxels) * voxel_ml;
        if (a.voxels > 0) {
            s.bbox_min = a.lo;
            s.bbox_max = a.hi;
            s.touches_border = touchesBorder(a.lo, a.hi, g.size, a.voxels);
            const double n = static_cast<double>(a.voxels);
            s.centroid_lps =
                g.indexToPhysical({a.index_sum[0] / n, a.index_sum[1] / n, a.index_sum[2] / n});
            if (intensity)
                s.intensity =
                    IntensityStatistics{a.mean, std::sqrt(a.sum_sq_dev / n), a.min, a.max};
        }
        report.labels.push_back(std::move(s));
    }
    return report;
}

std::string statisticsToJson(const StatisticsReport& report) {
    nlohmann::json root;
    root["coordinate_system"] = "LPS";
    root["units"] = {{"volume", "mL"}, {"centroid", "mm"}, {"intensity", report.intensity_unit}};
    root["spacing_mm"] = report.spacing;
    nlohmann::json arr = nlohmann::json::array();
    for (const LabelStatistics& s : report.labels) {
        nlohmann::json j;
        j["label"] = s.label;
        j["name"] = s.name;
        j["voxels"] = s.voxels;
        j["volume_ml"] = s.volume_ml;
        if (s.voxels > 0) {
            j["bbox_index_min"] = s.bbox_min;
            j["bbox_index_max"] = s.bbox_max;
            j["centroid_lps_mm"] = s.centroid_lps;
        } else {
            j["bbox_index_min"] = nullptr;
            j["bbox_index_max"] = nullptr;
            j["centroid_lps_mm"] = nullptr;
        }
        j["touches_border"] = s.touches_border;
        if (s.intensity) {
            j["intensity"] = {{"mean", s.intensity->mean},
                              {"std", s.intensity->std},
                              {"min", s.intensity->min},
                              {"max", s.intensity->max}};
        } else {
            j["intensity"] = nullptr;
        }
        if (s.plausible_volume_ml) {
            j["plausible_volume_ml"] = *s.plausible_volume_ml;
            j["implausible"] = s.implausible;
        }
        arr.push_back(std::move(j));
    }
    root["labels"] = std::move(arr);
    if (!report.measurements.empty()) {
        nlohmann::json ms = nlohmann::json::array();
        for (const Measurement& m : report.measurements)
            ms.push_back({{"name", m.name},
                          {"value", m.value},
                          {"unit", m.unit},
                          {"description", m.description}});
        root["measurements"] = std::move(ms);
    }
    root["warnings"] = report.warnings;
    return root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string statisticsToCsv(const StatisticsReport& report) {
    std::string out =
        "label,name,voxels,volume_ml,mean,std,min,max,bbox_i_min,bbox_j_min,bbox_k_min,"
        "bbox_i_max,bbox_j_max,bbox_k_max,centroid_x_mm,centroid_y_mm,centroid_z_mm\n";
    for (const LabelStatistics& s : report.labels) {
        out += fmt::format("{},{},{},{:.6f}", s.label, csvField(s.name), s.voxels, s.volume_ml);
        if (s.intensity)
            out += fmt::format(",{:.6g},{:.6g},{:.6g},{:.6g}", s.intensity->mean, s.intensity->std,
                               s.intensity->min, s.intensity->max);
        else
            out += ",,,,";
        if (s.voxels > 0)
            out +=
                fmt::format(",{},{},{},{},{},{},{:.4f},{:.4f},{:.4f}\n", s.bbox_min[0],
                            s.bbox_min[1], s.bbox_min[2], s.bbox_max[0], s.bbox_max[1],
                            s.bbox_max[2], s.centroid_lps[0], s.centroid_lps[1], s.centroid_lps[2]);
        else
            out += ",,,,,,,,,\n";
    }
    return out;
}

Status writeStatisticsJson(const StatisticsReport& report, const std::string& path) {
    return writeFileAtomically(path, statisticsToJson(report));
}

Status writeStatisticsCsv(const StatisticsReport& report, const std::string& path) {
    return writeFileAtomically(path, statisticsToCsv(report));
}

}  // namespace voxseg::pipeline
