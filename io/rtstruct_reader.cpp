// Plain dcmdata rather than dcmrt's DRTStructureSetIOD: dcmrt's read() refuses or silently
// empties items with missing type 1 attributes, where this reader must keep the rest of the
// file and name the ROI that is broken.
#include "io/rtstruct_reader.h"

#include "core/log.h"
#include "io/contours.h"
#include "io/dicom_charset.h"
#include "io/dicom_header.h"
#include "io/dicom_nesting.h"
#include "io/rtstruct_writer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <thread>

namespace voxseg::io {

namespace {

constexpr const char* kComponent = "io.rtstruct";
constexpr double kMinArea = 1e-9;  // pixel^2: below this a contour encloses nothing

// UTF-8 in the set in force for `item` (ROI names and descriptions are free text).
std::string str(DcmItem* item, const DcmTagKey& tag) { return charset::getUtf8(item, tag); }

std::optional<long> integer(DcmItem* item, const DcmTagKey& tag) {
    const std::string s = str(item, tag);
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (end == s.c_str()) return std::nullopt;
    return v;
}

// All values of a DS element (ContourData can hold 100000 numbers: DcmDecimalString's indexed
// access re-scans the string for every value).
bool decimals(DcmItem* item, const DcmTagKey& tag, std::vector<double>& out) {
    out.clear();
    const char* s = nullptr;
    Uint32 length = 0;
    DcmElement* e = nullptr;
    if (item->findAndGetElement(tag, e).bad() || !e) return false;
    char* raw = nullptr;
    if (e->getString(raw).bad() || !raw) return e->getLength() == 0;
    s = raw;
    length = e->getLength();
    const char* end = s + length;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == '\\')) ++s;
        if (s >= end || *s == '\0') break;
        char* stop = nullptr;
        const double v = std::strtod(s, &stop);
        if (stop == s) return false;
        out.push_back(v);
        s = stop;
        while (s < end && *s == ' ') ++s;
        if (s < end && *s != '\\' && *s != '\0') return false;
    }
    return true;
}

// One contour on its way to a plane.
struct PlacedContour {
    size_t roi = 0;  // index into the result's ROIs
    PlanarContour contour;
};

// Why contours of one ROI were dropped, gathered so that each reason is reported once.
struct RoiProblems {
    int off_plane = 0;
    int off_plane_absent_reference = 0;  // of those, referencing images absent from the series
    double off_min = std::numeric_limits<double>::max(), off_max = -off_min;
    double off_nearest = std::numeric_limits<double>::max();
    int not_planar = 0;
    double worst_spread = 0;
    int too_few_points = 0;
    int zero_area = 0;
    int bad_data = 0;
    int point = 0;
    int open = 0;
    int other_type = 0;
    int wrong_reference = 0;
    int absent_reference = 0;  // placed by position although their image is absent
};

template <typename T>
void paintPlanes(const std::vector<std::vector<PlacedContour>>& per_plane,
                 const std::vector<int>& values, int columns, int rows, T* labels, int threads,
                 std::atomic<int64_t>& overlap) {
    const int64_t plane_size = int64_t{columns} * rows;
    std::atomic<size_t> next{0};
    const auto work = [&] {
        int64_t local_overlap = 0;
        std::vector<PlanarContour> group;
        for (size_t k = next++; k < per_plane.size(); k = next++) {
            const auto& placed = per_plane[k];
            T* plane = labels + static_cast<int64_t>(k) * plane_size;
            // `placed` is sorted by ROI: one even-odd fill per ROI.
            for (size_t i = 0; i < placed.size();) {
                size_t j = i;
                group.clear();
                while (j < placed.size() && placed[j].roi == placed[i].roi)
                    group.push_back(placed[j++].contour);
                const T value = static_cast<T>(values[placed[i].roi]);
                for (const PixelSpan& s : rasterizeContours(group, columns, rows)) {
                    T* row = plane + static_cast<int64_t>(s.row) * columns;
                    for (int x = s.begin; x < s.end; ++x) {
                        local_overlap += row[x] != T(0) && row[x] != value;
                        row[x] = value;
                    }
                }
                i = j;
            }
        }
        overlap += local_overlap;
    };
    int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    n = std::clamp(n, 1, static_cast<int>(std::max<size_t>(per_plane.size(), 1)));
    if (n == 1) {
        work();
        return;
    }
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) pool.emplace_back(work);
    for (std::thread& t : pool) t.join();
}

std::string roiName(const RtRoi& r) {
    return fmt::format("ROI {} '{}'", r.roi_number, r.description.name);
}

// One RTSTRUCT file read onto one series, a step per part of the file (readRtStruct runs them in
// order). Each step fills the members the next ones read.
struct RtStructReading {
    RtStructReading(const std::string& file, DcmDataset* dataset, const SeriesCandidate& series,
                    const RtStructReadOptions& read_options)
        : path(file), ds(dataset), referenced(series), options(read_options) {
        result.structure_set_label = str(ds, DCM_StructureSetLabel);
    }

    const std::string& path;
    DcmDataset* ds;
    const SeriesCandidate& referenced;
    const RtStructReadOptions& options;
    RtStructReadResult result;

    // readReferences, readDeclaredRois
    std::set<std::string> file_frames;    // listed, or named by an ROI
    std::set<std::string> listed_frames;  // ReferencedFrameOfReferenceSequence
    std::map<long, size_t> roi_index;     // ROI number -> index into result.rois
    std::vector<std::string> roi_frame;   // per ROI, its ReferencedFrameOfReferenceUID
    // checkSeries
    std::set<std::string> accepted_frames;
    // preparePlanes
    AcquiredPlanes planes;
    size_t plane_count = 0;
    Vec3 normal{0, 0, 1};
    std::vector<double> plane_height;
    double tolerance = 0;
    std::map<std::string, size_t> plane_of_image;  // "uid" or "uid#frame" (1-based)
    // readContours, placeContour
    std::vector<RoiProblems> problems;
    std::vector<std::vector<PlacedContour>> per_plane;
    std::vector<double> values, heights;  // one contour's numbers and their heights

    void warn(RtRoi* roi, const std::string& text) {
        log::warning(kComponent, "{}: {}", path, text);
        result.warnings.push_back(text);
        if (roi) roi->warnings.push_back(text);
    }

    // Referenced frame(s) of reference and series, and the images they list.
    void readReferences() {
        DcmSequenceOfItems* frames = nullptr;
        if (ds->findAndGetSequence(DCM_ReferencedFrameOfReferenceSequence, frames).good() &&
            frames) {
            for (unsigned long f = 0; f < frames->card(); ++f) {
                DcmItem* frame = frames->getItem(f);
                const std::string uid = str(frame, DCM_FrameOfReferenceUID);
                if (!uid.empty()) file_frames.insert(uid), listed_frames.insert(uid);
                DcmSequenceOfItems* studies = nullptr;
                if (frame->findAndGetSequence(DCM_RTReferencedStudySequence, studies).bad() ||
                    !studies)
                    continue;
                for (unsigned long s = 0; s < studies->card(); ++s) {
                    DcmSequenceOfItems* series = nullptr;
                    if (studies->getItem(s)
                            ->findAndGetSequence(DCM_RTReferencedSeriesSequence, series)
                            .bad() ||
                        !series)
                        continue;
                    for (unsigned long r = 0; r < series->card(); ++r) {
                        const std::string uid = str(series->getItem(r), DCM_SeriesInstanceUID);
                        if (!uid.empty() && std::find(result.referenced_series_uids.begin(),
                                                      result.referenced_series_uids.end(),
                                                      uid) == result.referenced_series_uids.end())
                            result.referenced_series_uids.push_back(uid);
                    }
                }
            }
        }
    }

    // ROIs declared by the structure set.
    void readDeclaredRois() {
        DcmSequenceOfItems* declared = nullptr;
        ds->findAndGetSequence(DCM_StructureSetROISequence, declared);
        if (declared) {
            for (unsigned long i = 0; i < declared->card(); ++i) {
                DcmItem* item = declared->getItem(i);
                const auto number = integer(item, DCM_ROINumber);
                if (!number) {
                    warn(nullptr, fmt::format("StructureSetROISequence item {} ('{}') has no ROI "
                                              "number: skipped",
                                              i + 1, str(item, DCM_ROIName)));
                    continue;
                }
                if (roi_index.count(*number)) {
                    warn(nullptr, fmt::format("ROI number {} declared twice: the second ('{}') "
                                              "is ignored",
                                              *number, str(item, DCM_ROIName)));
                    continue;
                }
                RtRoi roi;
                roi.roi_number = static_cast<int>(*number);
                roi.description.name = str(item, DCM_ROIName);
                roi.description.description = str(item, DCM_ROIDescription);
                roi.generation_algorithm = str(item, DCM_ROIGenerationAlgorithm);
                // The same defined terms as a SEG's SegmentAlgorithmType; others are dropped.
                for (const char* term : {"AUTOMATIC", "SEMIAUTOMATIC", "MANUAL"})
                    if (roi.generation_algorithm == term) roi.description.algorithm_type = term;
                roi_frame.push_back(str(item, DCM_ReferencedFrameOfReferenceUID));
                if (!roi_frame.back().empty()) file_frames.insert(roi_frame.back());
                roi_index[*number] = result.rois.size();
                result.rois.push_back(std::move(roi));
            }
        }
        if (!listed_frames.empty())
            result.frame_of_reference_uid = *listed_frames.begin();
        else if (!file_frames.empty())
            result.frame_of_reference_uid = *file_frames.begin();
    }

    // The file must be about the series the caller gave.
    Status checkSeries() {
        const bool series_named =
            std::find(result.referenced_series_uids.begin(), result.referenced_series_uids.end(),
                      referenced.series_uid) != result.referenced_series_uids.end();
        const bool frame_matches = file_frames.count(referenced.frame_of_reference_uid) > 0;
        if (!result.referenced_series_uids.empty() && !series_named)
            return invalidArgument(
                fmt::format(
                    "RTSTRUCT references series {} (frame of reference {}), not the given "
                    "series {} (frame of reference {}): pass the series it was drawn on",
                    fmt::join(result.referenced_series_uids, ", "),
                    result.frame_of_reference_uid.empty() ? "none" : result.frame_of_reference_uid,
                    referenced.series_uid, referenced.frame_of_reference_uid),
                path);
        if (!frame_matches) {
            if (file_frames.empty() && !series_named)
                return invalidArgument(
                    "RTSTRUCT names neither a referenced series nor a frame of reference; cannot "
                    "tell whether it belongs to series " +
                        referenced.series_uid,
                    path);
            if (!series_named)
                return invalidArgument(
                    fmt::format("RTSTRUCT frame of reference {} differs from frame of reference "
                                "{} of the given series {}: pass the series it was drawn on",
                                fmt::join(file_frames, ", "), referenced.frame_of_reference_uid,
                                referenced.series_uid),
                    path);
            if (!file_frames.empty())
                warn(nullptr,
                     fmt::format("RTSTRUCT frame of reference {} differs from frame of reference "
                                 "{} of series {}, which it names as its referenced series: "
                                 "contours placed in that series' patient coordinates",
                                 fmt::join(file_frames, ", "), referenced.frame_of_reference_uid,
                                 referenced.series_uid));
        }
        // Frames of reference an ROI may be in: the series' own, and the file's when the file
        // names the series.
        accepted_frames = {referenced.frame_of_reference_uid};
        if (series_named) {
            accepted_frames.insert(listed_frames.begin(), listed_frames.end());
            if (listed_frames.empty())
                accepted_frames.insert(file_frames.begin(), file_frames.end());
        }
        if (result.referenced_series_uids.empty())
            warn(nullptr, "RTSTRUCT names no referenced series; matched to series " +
                              referenced.series_uid + " by its frame of reference");
        return Status::ok();
    }

    // The series' planes and the images behind them.
    void preparePlanes() {
        planes = AcquiredPlanes::of(referenced);
        plane_count = planes.planeCount();
        normal = cross(planes.row_dir, planes.col_dir);
        {
            const double len = std::sqrt(dot(normal, normal));
            if (len > 0)
                for (double& c : normal) c /= len;
        }
        plane_height.assign(plane_count, 0.0);
        for (size_t k = 0; k < plane_count; ++k)
            plane_height[k] = dot(planes.slices[k].position, normal);
        tolerance = options.plane_tolerance_mm;
        if (tolerance <= 0)
            tolerance = planes.slice_thickness > 0 && plane_count > 1
                            ? std::max(0.01, 0.25 * planes.slice_thickness)
                            : 0.5;
        {
            auto refs = readSourceImageRefs(planes.slices);
            if (refs.isOk()) {
                for (size_t k = 0; k < plane_count; ++k) {
                    const SourceImageRef& r = (*refs)[k];
                    plane_of_image[r.multi_frame
                                       ? r.sop_instance_uid + "#" + std::to_string(r.frame + 1)
                                       : r.sop_instance_uid] = k;
                }
            } else {
                log::warning(kComponent, "{}: {}; contours are placed by their positions only",
                             path, refs.status().toString());
            }
        }
    }

    // Contours: each placed on a plane or counted in its ROI's problems.
    void readContours() {
        problems.assign(result.rois.size(), RoiProblems{});
        per_plane.assign(plane_count, {});
        DcmSequenceOfItems* roi_contours = nullptr;
        ds->findAndGetSequence(DCM_ROIContourSequence, roi_contours);
        for (unsigned long i = 0; roi_contours && i < roi_contours->card(); ++i) {
            DcmItem* item = roi_contours->getItem(i);
            const auto number = integer(item, DCM_ReferencedROINumber);
            auto found = number ? roi_index.find(*number) : roi_index.end();
            if (found == roi_index.end()) {
                warn(nullptr, fmt::format("ROIContourSequence item {} refers to ROI number {}, "
                                          "which the structure set does not declare: skipped",
                                          i + 1, number ? std::to_string(*number) : "(none)"));
                continue;
            }
            const size_t r = found->second;
            RtRoi& roi = result.rois[r];
            {
                std::vector<double> color;
                if (decimals(item, DCM_ROIDisplayColor, color) && color.size() == 3)
                    for (int c = 0; c < 3; ++c)
                        roi.description.color[static_cast<size_t>(c)] = static_cast<uint8_t>(
                            std::clamp(color[static_cast<size_t>(c)], 0.0, 255.0));
            }
            const bool other_frame = !roi_frame[r].empty() && !accepted_frames.count(roi_frame[r]);
            DcmSequenceOfItems* contour_items = nullptr;
            item->findAndGetSequence(DCM_ContourSequence, contour_items);
            const unsigned long count = contour_items ? contour_items->card() : 0;
            roi.contours += static_cast<int>(count);
            if (other_frame) {
                warn(&roi, fmt::format("{} is in frame of reference {}, not {}: its {} "
                                       "contour(s) are skipped",
                                       roiName(roi), roi_frame[r],
                                       referenced.frame_of_reference_uid, count));
                continue;
            }
            RoiProblems& p = problems[r];
            for (unsigned long c = 0; c < count; ++c) {
                placeContour(contour_items->getItem(c), r, roi, p);
            }
        }
    }

    // One contour of ROI r onto the plane it lies on, or a count of why not.
    void placeContour(DcmItem* contour, size_t r, RtRoi& roi, RoiProblems& p) {
        const std::string type = str(contour, DCM_ContourGeometricType);
        if (type == "POINT") {
            ++p.point;
            return;
        }
        if (type == "OPEN_PLANAR" || type == "OPEN_NONPLANAR") {
            ++p.open;
            return;
        }
        if (type != "CLOSED_PLANAR" && !type.empty()) {
            ++p.other_type;
            return;
        }
        if (!decimals(contour, DCM_ContourData, values) || values.size() % 3 != 0) {
            ++p.bad_data;
            return;
        }
        const size_t n = values.size() / 3;
        if (n < 3) {
            ++p.too_few_points;
            return;
        }
        bool finite = true;
        for (double v : values) finite &= std::isfinite(v);
        if (!finite) {
            ++p.bad_data;
            return;
        }
        heights.resize(n);
        double mean = 0;
        for (size_t q = 0; q < n; ++q) {
            heights[q] = values[3 * q] * normal[0] + values[3 * q + 1] * normal[1] +
                         values[3 * q + 2] * normal[2];
            mean += heights[q];
        }
        mean /= static_cast<double>(n);
        double spread = 0;
        for (double h : heights) spread = std::max(spread, std::abs(h - mean));

        // The plane: the referenced image when the contour lies on it, else geometry.
        size_t k = plane_count;
        bool absent_reference = false;
        DcmItem* image = nullptr;
        if (contour->findAndGetSequenceItem(DCM_ContourImageSequence, image, 0).good() && image) {
            const std::string uid = str(image, DCM_ReferencedSOPInstanceUID);
            const auto frame = integer(image, DCM_ReferencedFrameNumber);
            auto it = plane_of_image.find(frame ? uid + "#" + std::to_string(*frame) : uid);
            if (it != plane_of_image.end()) {
                if (std::abs(plane_height[it->second] - mean) <= tolerance)
                    k = it->second;
                else
                    ++p.wrong_reference;
            } else if (!uid.empty()) {
                absent_reference = true;
            }
        }
        if (k == plane_count) {
            double best = std::numeric_limits<double>::max();
            for (size_t q = 0; q < plane_count; ++q) {
                const double d = std::abs(plane_height[q] - mean);
                if (d < best) best = d, k = q;
            }
            if (best > tolerance) {
                ++p.off_plane;
                p.off_plane_absent_reference += absent_reference;
                p.off_min = std::min(p.off_min, mean);
                p.off_max = std::max(p.off_max, mean);
                p.off_nearest = std::min(p.off_nearest, best);
                return;
            }
        }
        p.absent_reference += absent_reference;
        if (spread > tolerance) {
            ++p.not_planar;
            p.worst_spread = std::max(p.worst_spread, spread);
            return;
        }
        PlacedContour placed;
        placed.roi = r;
        placed.contour.points.resize(n);
        const Vec3& origin = planes.slices[k].position;
        for (size_t q = 0; q < n; ++q) {
            const Vec3 d{values[3 * q] - origin[0], values[3 * q + 1] - origin[1],
                         values[3 * q + 2] - origin[2]};
            placed.contour.points[q] = {dot(d, planes.row_dir) / planes.column_spacing,
                                        dot(d, planes.col_dir) / planes.row_spacing};
        }
        if (std::abs(signedArea(placed.contour.points)) < kMinArea) {
            ++p.zero_area;
            return;
        }
        ++roi.contours_placed;
        per_plane[k].push_back(std::move(placed));
    }

    // Observations: interpreted type and identification code.
    void readObservations() {
        DcmSequenceOfItems* observations = nullptr;
        ds->findAndGetSequence(DCM_RTROIObservationsSequence, observations);
        for (unsigned long i = 0; observations && i < observations->card(); ++i) {
            DcmItem* item = observations->getItem(i);
            const auto number = integer(item, DCM_ReferencedROINumber);
            auto found = number ? roi_index.find(*number) : roi_index.end();
            if (found == roi_index.end()) continue;
            RtRoi& roi = result.rois[found->second];
            roi.interpreted_type = str(item, DCM_RTROIInterpretedType);
            DcmItem* code = nullptr;
            if (item->findAndGetSequenceItem(DCM_RTROIIdentificationCodeSequence, code, 0).good() &&
                code)
                roi.description.type = {str(code, DCM_CodeValue),
                                        str(code, DCM_CodingSchemeDesignator),
                                        str(code, DCM_CodeMeaning)};
        }
    }

    // One warning per ROI and reason.
    void reportProblems() {
        for (size_t r = 0; r < result.rois.size(); ++r) {
            RtRoi& roi = result.rois[r];
            const RoiProblems& p = problems[r];
            const std::string name = roiName(roi);
            if (p.off_plane)
                warn(&roi,
                     fmt::format("{}: {} contour(s) lie on no image of series {} (at {:.2f} .. "
                                 "{:.2f} mm along the image normal, the nearest image {:.2f} mm "
                                 "away, tolerance {:.3g} mm; {} of them reference images absent "
                                 "from the series): skipped",
                                 name, p.off_plane, referenced.series_uid, p.off_min, p.off_max,
                                 p.off_nearest, tolerance, p.off_plane_absent_reference));
            if (p.not_planar)
                warn(&roi, fmt::format("{}: {} contour(s) are not planar (points up to {:.3g} mm "
                                       "off their plane): skipped",
                                       name, p.not_planar, p.worst_spread));
            if (p.too_few_points)
                warn(&roi, fmt::format("{}: {} contour(s) with fewer than 3 points: skipped", name,
                                       p.too_few_points));
            if (p.zero_area)
                warn(&roi,
                     fmt::format("{}: {} contour(s) enclose no area: skipped", name, p.zero_area));
            if (p.bad_data)
                warn(&roi, fmt::format("{}: {} contour(s) with unreadable ContourData (not a "
                                       "multiple of 3 numbers, or not finite): skipped",
                                       name, p.bad_data));
            if (p.point)
                warn(&roi, fmt::format("{}: {} POINT contour(s) (markers, no area): skipped", name,
                                       p.point));
            if (p.open)
                warn(&roi, fmt::format("{}: {} open contour(s) (OPEN_PLANAR/OPEN_NONPLANAR, no "
                                       "area): skipped",
                                       name, p.open));
            if (p.other_type)
                warn(&roi, fmt::format("{}: {} contour(s) of an unknown ContourGeometricType: "
                                       "skipped",
                                       name, p.other_type));
            if (p.wrong_reference)
                warn(&roi, fmt::format("{}: {} contour(s) do not lie on the image they reference; "
                                       "placed by their position",
                                       name, p.wrong_reference));
            if (p.absent_reference)
                warn(&roi, fmt::format("{}: {} contour(s) reference images absent from series {} "
                                       "but lie on one of its images: placed there",
                                       name, p.absent_reference, referenced.series_uid));
            if (roi.contours == 0) warn(&roi, fmt::format("{}: no contours", name));
        }
    }

    // Label values, painted in ascending ROI number, on the acquired planes (and the grid).
    Status paintLabels() {
        std::vector<int> value_of(result.rois.size(), 0);
        int max_value = 0;
        for (size_t r = 0; r < result.rois.size(); ++r) {
            RtRoi& roi = result.rois[r];
            auto mapped = options.label_values.find(roi.description.name);
            int v = mapped != options.label_values.end() ? mapped->second : roi.roi_number;
            if (v < 1 || v > 65535) {
                warn(&roi, fmt::format("{}: label value {} is outside 1..65535: not drawn",
                                       roiName(roi), v));
                v = 0;
                for (auto& placed : per_plane)
                    placed.erase(std::remove_if(placed.begin(), placed.end(),
                                                [r](const PlacedContour& c) { return c.roi == r; }),
                                 placed.end());
            }
            roi.description.value = v;
            value_of[r] = v;
            max_value = std::max(max_value, v);
        }
        // Paint in ascending ROI number (the higher number wins where ROIs overlap).
        std::vector<size_t> order(result.rois.size());
        for (size_t r = 0; r < order.size(); ++r) order[r] = r;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            return result.rois[a].roi_number < result.rois[b].roi_number;
        });
        std::vector<size_t> rank(order.size());
        for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = i;
        for (auto& placed : per_plane)
            std::stable_sort(placed.begin(), placed.end(),
                             [&](const PlacedContour& a, const PlacedContour& b) {
                                 return rank[a.roi] < rank[b.roi];
                             });

        // The acquired planes as a volume on the series' nominal geometry.
        Geometry g = referenced.geometry;
        g.size = {planes.columns, planes.rows, static_cast<int64_t>(plane_count)};
        std::atomic<int64_t> overlap{0};
        result.acquired.planes = planes;
        result.acquired.resampled =
            referenced.tilted || referenced.uneven_spacing || referenced.has_gaps;
        VolumeInfo info;
        info.modality = "RTSTRUCT";
        info.series_uid = referenced.series_uid;
        info.source = path;
        if (max_value <= 255) {
            result.acquired.labels = Volume::allocate<uint8_t>(g, info);
            paintPlanes(per_plane, value_of, planes.columns, planes.rows,
                        result.acquired.labels.data<uint8_t>(), options.threads, overlap);
        } else {
            result.acquired.labels = Volume::allocate<uint16_t>(g, info);
            paintPlanes(per_plane, value_of, planes.columns, planes.rows,
                        result.acquired.labels.data<uint16_t>(), options.threads, overlap);
        }
        result.overlapping_voxels = overlap;
        if (result.overlapping_voxels > 0)
            log::info(kComponent,
                      "{}: {} pixel(s) claimed by more than one ROI (higher ROI "
                      "number kept)",
                      path, result.overlapping_voxels);

        // Voxels per label value.
        std::vector<int64_t> histogram(static_cast<size_t>(max_value) + 1, 0);
        const int64_t total = g.voxelCount();
        if (const uint8_t* d = result.acquired.labels.data<uint8_t>())
            for (int64_t i = 0; i < total; ++i) ++histogram[d[i]];
        else if (const uint16_t* d16 = result.acquired.labels.data<uint16_t>())
            for (int64_t i = 0; i < total; ++i) ++histogram[d16[i]];
        for (RtRoi& roi : result.rois)
            if (roi.description.value > 0)
                roi.voxels = histogram[static_cast<size_t>(roi.description.value)];

        std::sort(result.rois.begin(), result.rois.end(),
                  [](const RtRoi& a, const RtRoi& b) { return a.roi_number < b.roi_number; });

        if (options.grid) {
            auto on_grid = labelsOnGrid(result.acquired, *options.grid, options.threads);
            if (!on_grid.isOk()) return on_grid.status().withContext("RTSTRUCT onto the grid: ");
            result.grid_labels = std::move(on_grid).value();
        }
        return Status::ok();
    }
};

}  // namespace

bool isRtStruct(const std::string& path) {
    std::error_code ec;
    // Only what looks like DICOM reaches DCMTK, which logs errors for anything else (NIfTI).
    if (!std::filesystem::is_regular_file(path, ec) || !looksLikeDicom(path)) return false;
    // Too deep for DCMTK: not taken as an RTSTRUCT; the DICOM scan refuses it with the reason.
    if (!checkDicomNesting(path).isOk()) return false;
    DcmFileFormat file;
    // Stop before the structure set module: SOP class and modality come first.
    if (file.loadFileUntilTag(path.c_str(), EXS_Unknown, EGL_noChange, 4096, ERM_autoDetect,
                              DCM_StructureSetLabel)
            .bad())
        return false;
    return str(file.getDataset(), DCM_SOPClassUID) == UID_RTStructureSetStorage;
}

Result<RtStructReadResult> readRtStruct(const std::string& path, const SeriesCandidate& referenced,
                                        const RtStructReadOptions& options) {
    if (referenced.slices.empty())
        return invalidArgument("RTSTRUCT: the referenced series has no images", path);
    VOXSEG_RETURN_IF_ERROR(checkDicomNesting(path));
    DcmFileFormat file;
    OFCondition cond = file.loadFile(path.c_str());
    if (cond.bad())
        return corruptData(
            std::string("cannot read this file as DICOM (truncated or not DICOM): ") + cond.text(),
            path);
    DcmDataset* ds = file.getDataset();
    const std::string sop_class = str(ds, DCM_SOPClassUID);
    if (sop_class != UID_RTStructureSetStorage)
        return invalidArgument("not a DICOM RT Structure Set (SOP class " +
                                   (sop_class.empty() ? std::string("missing") : sop_class) +
                                   ", modality " + str(ds, DCM_Modality) + ")",
                               path);

    try {
        RtStructReading reading(path, ds, referenced, options);
        reading.readReferences();
        reading.readDeclaredRois();
        VOXSEG_RETURN_IF_ERROR(reading.checkSeries());
        reading.preparePlanes();
        reading.readContours();
        reading.readObservations();
        reading.reportProblems();
        VOXSEG_RETURN_IF_ERROR(reading.paintLabels());
        return std::move(reading.result);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while reading the RTSTRUCT", path);
    }
}

}  // namespace voxseg::io
