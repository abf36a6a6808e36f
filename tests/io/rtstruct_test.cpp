// RTSTRUCT: planar contour extraction and scan conversion (io/contours.h) round-trip exactly on
// random planes (holes, islands, saddles, single pixels, labels on the border); the writer and
// reader (io/rtstruct_writer.h, io/rtstruct_reader.h) round-trip label planes of straight and
// tilted synthetic series; dciodvfy accepts the file; plastimatch reads it back with per-ROI
// Dice >= 0.98 (0.95 under 1 mL); bad input gives errors or warnings naming the ROI.
#include "io/acquired_labels.h"
#include "io/contours.h"
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "io/image_io.h"
#include "io/rtstruct_reader.h"
#include "io/rtstruct_writer.h"

#include "tests/io/dicom_tools.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>

namespace voxseg::io {
namespace {

namespace fs = std::filesystem;
using voxseg::testing::TempDir;

// ---------------------------------------------------------------------------------------------
// Contours

// A random plane of labels 0..labels: blobs (smoothed noise thresholded) or plain noise, which
// gives many diagonal-only contacts, holes and islands.
std::vector<uint8_t> randomPlane(int columns, int rows, int labels, bool noise, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> plane(static_cast<size_t>(columns) * rows, 0);
    if (noise) {
        std::uniform_int_distribution<int> value(0, labels);
        for (auto& v : plane) v = static_cast<uint8_t>(value(rng));
        return plane;
    }
    for (int l = 1; l <= labels; ++l) {
        std::uniform_real_distribution<double> u(0, 1);
        std::vector<double> field(plane.size());
        for (auto& f : field) f = u(rng);
        for (int pass = 0; pass < 2; ++pass) {  // box blur, 3x3
            std::vector<double> out(field.size(), 0);
            for (int y = 0; y < rows; ++y)
                for (int x = 0; x < columns; ++x) {
                    double s = 0;
                    int n = 0;
                    for (int dy = -1; dy <= 1; ++dy)
                        for (int dx = -1; dx <= 1; ++dx) {
                            const int xx = x + dx, yy = y + dy;
                            if (xx < 0 || yy < 0 || xx >= columns || yy >= rows) continue;
                            s += field[static_cast<size_t>(yy) * columns + xx];
                            ++n;
                        }
                    out[static_cast<size_t>(y) * columns + x] = s / n;
                }
            field = out;
        }
        for (size_t i = 0; i < plane.size(); ++i)
            if (field[i] > 0.55) plane[i] = static_cast<uint8_t>(l);
    }
    return plane;
}

bool halfPixelVertex(const ContourPoint& p) {
    // On a pixel edge: one coordinate an integer, the other an integer + 0.5.
    const auto frac = [](double v) { return v - std::floor(v); };
    return (frac(p.x) == 0 && frac(p.y) == 0.5) || (frac(p.x) == 0.5 && frac(p.y) == 0);
}

bool segmentsCross(const ContourPoint& a, const ContourPoint& b, const ContourPoint& c,
                   const ContourPoint& d) {
    const auto orient = [](const ContourPoint& p, const ContourPoint& q, const ContourPoint& r) {
        const double v = (q.x - p.x) * (r.y - p.y) - (q.y - p.y) * (r.x - p.x);
        return (v > 0) - (v < 0);
    };
    const int o1 = orient(a, b, c), o2 = orient(a, b, d), o3 = orient(c, d, a),
              o4 = orient(c, d, b);
    if (o1 != o2 && o3 != o4) return true;
    const auto on = [](const ContourPoint& p, const ContourPoint& q, const ContourPoint& r) {
        return std::min(p.x, q.x) <= r.x && r.x <= std::max(p.x, q.x) &&
               std::min(p.y, q.y) <= r.y && r.y <= std::max(p.y, q.y);
    };
    return (o1 == 0 && on(a, b, c)) || (o2 == 0 && on(a, b, d)) || (o3 == 0 && on(c, d, a)) ||
           (o4 == 0 && on(c, d, b));
}

// Every structural promise of io/contours.h for one label's contours.
void expectWellFormed(const std::vector<PlanarContour>& contours, const std::string& what) {
    std::set<std::pair<double, double>> vertices;
    std::vector<std::pair<ContourPoint, ContourPoint>> edges;
    for (const PlanarContour& c : contours) {
        ASSERT_GE(c.points.size(), 4u) << what;
        const double area = signedArea(c.points);
        EXPECT_EQ(c.hole, area < 0) << what;
        EXPECT_NE(area, 0) << what;
        const size_t n = c.points.size();
        for (size_t i = 0; i < n; ++i) {
            const ContourPoint& p = c.points[(i + n - 1) % n];
            const ContourPoint& q = c.points[i];
            const ContourPoint& r = c.points[(i + 1) % n];
            EXPECT_TRUE(halfPixelVertex(q)) << what << ": vertex " << q.x << "," << q.y;
            const double turn = (q.x - p.x) * (r.y - q.y) - (q.y - p.y) * (r.x - q.x);
            EXPECT_NE(turn, 0) << what << ": collinear vertex " << q.x << "," << q.y;
            EXPECT_TRUE(vertices.insert({q.x, q.y}).second)
                << what << ": vertex used twice " << q.x << "," << q.y;
            edges.push_back({q, r});
        }
    }
    // No two edges meet except consecutive ones at their shared vertex.
    for (size_t i = 0; i < edges.size(); ++i)
        for (size_t j = i + 1; j < edges.size(); ++j) {
            const auto& [a, b] = edges[i];
            const auto& [c, d] = edges[j];
            const bool adjacent = (b.x == c.x && b.y == c.y) || (d.x == a.x && d.y == a.y);
            if (adjacent) continue;
            ASSERT_FALSE(segmentsCross(a, b, c, d))
                << what << ": edges (" << a.x << "," << a.y << ")-(" << b.x << "," << b.y
                << ") and (" << c.x << "," << c.y << ")-(" << d.x << "," << d.y << ") meet";
        }
}

// Extract every label, rasterize back, compare; returns the number of holes seen.
int expectRoundTrip(const std::vector<uint8_t>& plane, int columns, int rows,
                    const std::string& what) {
    int holes = 0;
    std::vector<uint8_t> back(plane.size(), 0);
    for (const LabelContours& lc : extractPlaneContours(plane.data(), columns, rows)) {
        expectWellFormed(lc.contours, what + " label " + std::to_string(lc.label));
        for (const auto& c : lc.contours) holes += c.hole;
        const auto mask = rasterizeContoursToMask(lc.contours, columns, rows);
        for (size_t i = 0; i < mask.size(); ++i) {
            if (!mask[i]) continue;
            EXPECT_EQ(back[i], 0) << what << ": pixel " << i << " claimed twice";
            back[i] = static_cast<uint8_t>(lc.label);
        }
    }
    int64_t differences = 0;
    for (size_t i = 0; i < plane.size(); ++i) differences += back[i] != plane[i];
    EXPECT_EQ(differences, 0) << what;
    return holes;
}

TEST(Contours, SinglePixelIsADiamondAroundItsCentre) {
    std::vector<uint8_t> plane(5 * 4, 0);
    plane[2 * 5 + 3] = 1;
    const auto contours = extractContours<uint8_t>(plane.data(), 5, 4, 1);
    ASSERT_EQ(contours.size(), 1u);
    EXPECT_FALSE(contours[0].hole);
    EXPECT_EQ(contours[0].points.size(), 4u);
    EXPECT_DOUBLE_EQ(signedArea(contours[0].points), 0.5);
    std::set<std::pair<double, double>> v;
    for (const auto& p : contours[0].points) v.insert({p.x, p.y});
    EXPECT_EQ(v, (std::set<std::pair<double, double>>{{2.5, 2}, {3.5, 2}, {3, 1.5}, {3, 2.5}}));
    expectRoundTrip(plane, 5, 4, "single pixel");
}

TEST(Contours, FullPlaneReachesTheImageEdge) {
    std::vector<uint8_t> plane(6 * 3, 7);
    const auto contours = extractContours<uint8_t>(plane.data(), 6, 3, 7);
    ASSERT_EQ(contours.size(), 1u);
    double min_x = 1e9, max_x = -1e9, min_y = 1e9, max_y = -1e9;
    for (const auto& p : contours[0].points) {
        min_x = std::min(min_x, p.x), max_x = std::max(max_x, p.x);
        min_y = std::min(min_y, p.y), max_y = std::max(max_y, p.y);
    }
    EXPECT_EQ(min_x, -0.5);
    EXPECT_EQ(max_x, 5.5);
    EXPECT_EQ(min_y, -0.5);
    EXPECT_EQ(max_y, 2.5);
    // A rectangle with its corners cut: 8 vertices after merging collinear ones.
    EXPECT_EQ(contours[0].points.size(), 8u);
    expectRoundTrip(plane, 6, 3, "full plane");
}

TEST(Contours, DiagonalContactIsOnePolygon) {
    // x . / . x : two pixels touching at a corner (a saddle cell): 8-connected, one polygon.
    std::vector<uint8_t> plane = {1, 0, 0,  //
                                  0, 1, 0,  //
                                  0, 0, 1};
    const auto contours = extractContours<uint8_t>(plane.data(), 3, 3, 1);
    ASSERT_EQ(contours.size(), 1u);
    EXPECT_FALSE(contours[0].hole);
    expectRoundTrip(plane, 3, 3, "diagonal");
    // The background's diagonal contact inside a ring stays two holes (background 4-connected).
    std::vector<uint8_t> ring = {1, 1, 1, 1,  //
                                 1, 0, 1, 1,  //
                                 1, 1, 0, 1,  //
                                 1, 1, 1, 1};
    const auto rc = extractContours<uint8_t>(ring.data(), 4, 4, 1);
    int holes = 0;
    for (const auto& c : rc) holes += c.hole;
    EXPECT_EQ(rc.size(), 3u);
    EXPECT_EQ(holes, 2);
    expectRoundTrip(ring, 4, 4, "ring with diagonal holes");
}

TEST(Contours, HoleAndIslandNest) {
    // A 9x9 square with a 5x5 hole holding a 1-pixel island.
    const int n = 11;
    std::vector<uint8_t> plane(n * n, 0);
    for (int y = 1; y < 10; ++y)
        for (int x = 1; x < 10; ++x) plane[y * n + x] = 2;
    for (int y = 3; y < 8; ++y)
        for (int x = 3; x < 8; ++x) plane[y * n + x] = 0;
    plane[5 * n + 5] = 2;
    const auto contours = extractContours<uint8_t>(plane.data(), n, n, 2);
    ASSERT_EQ(contours.size(), 3u);
    int holes = 0;
    for (const auto& c : contours) holes += c.hole;
    EXPECT_EQ(holes, 1);
    expectRoundTrip(plane, n, n, "hole and island");
}

TEST(Contours, RandomPlanesRoundTripExactly) {
    int holes = 0;
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        const int columns = 17 + static_cast<int>(seed % 7) * 3,
                  rows = 11 + static_cast<int>(seed % 5) * 4;
        const bool noise = seed % 2 == 0;
        const int labels = 1 + static_cast<int>(seed % 4);
        const auto plane = randomPlane(columns, rows, labels, noise, seed);
        holes += expectRoundTrip(plane, columns, rows,
                                 "seed " + std::to_string(seed) + (noise ? " noise" : " blobs"));
        if (HasFatalFailure() || HasNonfatalFailure()) return;
    }
    EXPECT_GT(holes, 10);  // the planes did exercise holes
}

TEST(Contours, Uint16LabelsAndVolumeExtraction) {
    Geometry g;
    g.size = {23, 19, 5};
    Volume v = Volume::allocate<uint16_t>(g);
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> value(0, 3);
    for (int64_t i = 0; i < g.voxelCount(); ++i)
        v.data<uint16_t>()[i] = static_cast<uint16_t>(value(rng) == 0 ? 0 : 1000 + value(rng));
    const auto all = extractVolumeContours(v, 2);
    ASSERT_EQ(all.size(), 5u);
    for (int64_t k = 0; k < 5; ++k) {
        const uint16_t* plane = v.data<uint16_t>() + k * 23 * 19;
        std::vector<uint16_t> back(23 * 19, 0);
        for (const LabelContours& lc : all[static_cast<size_t>(k)]) {
            EXPECT_GE(lc.label, 1000);
            for (const PixelSpan& s : rasterizeContours(lc.contours, 23, 19))
                for (int x = s.begin; x < s.end; ++x)
                    back[static_cast<size_t>(s.row) * 23 + x] = static_cast<uint16_t>(lc.label);
        }
        for (int i = 0; i < 23 * 19; ++i) ASSERT_EQ(back[i], plane[i]) << "plane " << k;
    }
}

TEST(Contours, ScanConversionUsesPixelCentresAndEvenOdd) {
    // A square from (1.2, 1.2) to (4.8, 3.6): centres x 2..4, y 2..3.
    PlanarContour square{{{1.2, 1.2}, {4.8, 1.2}, {4.8, 3.6}, {1.2, 3.6}}, false};
    auto mask = rasterizeContoursToMask({square}, 7, 6);
    for (int y = 0; y < 6; ++y)
        for (int x = 0; x < 7; ++x)
            EXPECT_EQ(mask[y * 7 + x], x >= 2 && x <= 4 && y >= 2 && y <= 3) << x << "," << y;
    // A second square overlapping it: even-odd, the shared part is outside (whatever winding).
    PlanarContour other{{{3.5, 2.5}, {3.5, 5.5}, {6.5, 5.5}, {6.5, 2.5}}, false};
    mask = rasterizeContoursToMask({square, other}, 7, 6);
    EXPECT_EQ(mask[2 * 7 + 2], 1);
    EXPECT_EQ(mask[3 * 7 + 4], 0);  // in both
    EXPECT_EQ(mask[4 * 7 + 5], 1);  // only in the second
    // Beyond the plane: clipped, no crash; a centre on a left edge is inside, on a right one out.
    PlanarContour big{{{-10, -10}, {2, -10}, {2, 20}, {-10, 20}}, false};
    mask = rasterizeContoursToMask({big}, 4, 3);
    for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 4; ++x) EXPECT_EQ(mask[y * 4 + x], x < 2) << x << "," << y;
    // Degenerate input contributes nothing.
    PlanarContour line{{{0, 0}, {3, 2}}, false};
    EXPECT_TRUE(rasterizeContours({line}, 4, 3).empty());
    PlanarContour nan{{{0, 0}, {NAN, 2}, {3, 1}}, false};
    (void)rasterizeContours({nan}, 4, 3);
}

TEST(Contours, CtSizedVolumeContoursFast) {
    // 512 x 512 x 300 with 8 ellipsoidal organs (one hollow): the writer's contour step.
    Geometry g;
    g.size = {512, 512, 300};
    Volume v = Volume::allocate<uint8_t>(g);
    uint8_t* d = v.data<uint8_t>();
    struct Organ {
        double cx, cy, cz, rx, ry, rz;
    };
    const Organ organs[8] = {{180, 250, 150, 90, 70, 80}, {340, 260, 140, 60, 50, 60},
                             {256, 140, 200, 50, 30, 70}, {256, 380, 100, 40, 40, 90},
                             {120, 350, 60, 30, 20, 40},  {390, 350, 230, 35, 25, 50},
                             {256, 256, 40, 20, 20, 30},  {256, 256, 260, 100, 100, 30}};
    for (int64_t k = 0; k < 300; ++k)
        for (int64_t j = 0; j < 512; ++j)
            for (int64_t i = 0; i < 512; ++i)
                for (int o = 0; o < 8; ++o) {
                    const Organ& r = organs[o];
                    const double e = std::pow((i - r.cx) / r.rx, 2) +
                                     std::pow((j - r.cy) / r.ry, 2) +
                                     std::pow((k - r.cz) / r.rz, 2);
                    if (e <= 1 && !(o == 7 && e < 0.5)) d[(k * 512 + j) * 512 + i] = o + 1;
                }
    const auto start = std::chrono::steady_clock::now();
    const auto contours = extractVolumeContours(v, 2);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t count = 0, points = 0;
    for (const auto& plane : contours)
        for (const auto& lc : plane)
            for (const auto& c : lc.contours) ++count, points += c.points.size();
    std::printf("512x512x300, 8 labels: %lld contours, %lld points in %.3f s on 2 threads\n",
                static_cast<long long>(count), static_cast<long long>(points), seconds);
    EXPECT_GT(count, 900);  // 8 organs on about 120 planes each
    // "Well under a second" on 2 otherwise idle cores; the bound leaves room for a busy machine.
    EXPECT_LT(seconds, 2.0);
}

// ---------------------------------------------------------------------------------------------
// Writer and reader

struct Series {
    std::string folder;
    SeriesCandidate candidate;
    std::vector<std::string> files;
};

Series writeSeries(const TempDir& dir, SynthSeriesSpec spec, const std::string& name) {
    Series s;
    s.folder = dir / name;
    spec.ct_image_iod = true;
    auto files = writeSynthSeries(spec, s.folder);
    EXPECT_TRUE(files.isOk()) << files.status().toString();
    if (files.isOk()) s.files = *files;
    auto scan = scanDicom({s.folder}, DicomScanOptions{2});
    EXPECT_TRUE(scan.isOk()) << scan.status().toString();
    if (scan.isOk() && scan->series.size() == 1) s.candidate = scan->series.front();
    return s;
}

std::vector<SegmentDescription> describe(const std::map<int, std::string>& names) {
    std::vector<SegmentDescription> out;
    for (const auto& [value, name] : names) {
        SegmentDescription d;
        d.value = value;
        d.name = name;
        d.color = {static_cast<uint8_t>(40 * value), static_cast<uint8_t>(255 - 30 * value), 77};
        d.type = {"10200004", "SCT", name};
        out.push_back(d);
    }
    return out;
}

// Labels on the acquired planes of `series`: a ring with a hole, a blob with an island in a
// hole, diagonal pixels, a label on the border, a single pixel.
AcquiredLabels makeLabels(const SeriesCandidate& series) {
    AcquiredLabels a;
    a.planes = AcquiredPlanes::of(series);
    Geometry g = series.geometry;
    g.size = {a.planes.columns, a.planes.rows, static_cast<int64_t>(a.planes.planeCount())};
    a.labels = Volume::allocate<uint8_t>(g);
    uint8_t* d = a.labels.data<uint8_t>();
    const int c = a.planes.columns, r = a.planes.rows;
    std::mt19937 rng(5);
    for (int64_t k = 0; k < g.size[2]; ++k) {
        const auto plane = randomPlane(c, r, 3, false, static_cast<uint32_t>(100 + k));
        uint8_t* p = d + k * c * r;
        for (int i = 0; i < c * r; ++i) p[i] = plane[static_cast<size_t>(i)];
        if (k == 1) {
            for (int i = 0; i < c * r; ++i) p[i] = 0;
            for (int y = 2; y < 10; ++y)  // ring, label 2
                for (int x = 2; x < 12; ++x)
                    p[y * c + x] = (y >= 4 && y < 8 && x >= 4 && x < 10) ? 0 : 2;
            p[5 * c + 6] = 2;            // island in the hole
            p[0] = 4, p[c + 1] = 4;      // diagonal pair on the border corner
            p[(r - 1) * c + c - 1] = 5;  // single pixel in the far corner
        }
    }
    return a;
}

TEST(RtStruct, WriteReadRoundTripIsExact) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 24;
    spec.rows = 20;
    spec.slices = 5;
    spec.origin = {-12.5, 30.25, -80};
    const Series series = writeSeries(dir, spec, "ct");
    ASSERT_FALSE(series.candidate.slices.empty());
    const AcquiredLabels labels = makeLabels(series.candidate);
    const auto rois = describe(
        {{1, "Liver"}, {2, "Ring"}, {3, "Spleen"}, {4, "Corner"}, {5, "Dot"}, {9, "Absent"}});
    const std::string path = dir / "rtss.dcm";
    RtStructWriteOptions options;
    options.threads = 2;
    auto report = writeRtStruct(labels, series.candidate, rois, options, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->rois, 5);
    EXPECT_EQ(report->empty_labels, std::vector<int>{9});
    EXPECT_FALSE(report->implicit_vr);
    EXPECT_GT(report->contours, 10);

    auto back = readRtStruct(path, series.candidate, RtStructReadOptions{.threads = 2});
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_TRUE(back->warnings.empty()) << back->warnings.front();
    EXPECT_EQ(back->overlapping_voxels, 0);
    EXPECT_EQ(back->frame_of_reference_uid, series.candidate.frame_of_reference_uid);
    EXPECT_EQ(back->referenced_series_uids, std::vector<std::string>{series.candidate.series_uid});
    EXPECT_EQ(back->structure_set_label, "VOXSEG");
    ASSERT_EQ(back->rois.size(), 5u);
    for (const RtRoi& roi : back->rois) {
        const SegmentDescription* d = nullptr;
        for (const auto& r : rois)
            if (r.value == roi.roi_number) d = &r;
        ASSERT_NE(d, nullptr) << roi.roi_number;
        EXPECT_EQ(roi.description.name, d->name);
        EXPECT_EQ(roi.description.value, d->value);
        EXPECT_EQ(roi.description.color, d->color);
        EXPECT_EQ(roi.description.type.code, "10200004");
        EXPECT_EQ(roi.interpreted_type, "ORGAN");
        EXPECT_EQ(roi.generation_algorithm, "AUTOMATIC");
        EXPECT_EQ(roi.contours, roi.contours_placed);
        EXPECT_GT(roi.voxels, 0);
    }
    ASSERT_EQ(back->acquired.labels.pixelType(), PixelType::kUInt8);
    ASSERT_EQ(back->acquired.labels.geometry().voxelCount(), labels.labels.geometry().voxelCount());
    int64_t differences = 0;
    for (int64_t i = 0; i < labels.labels.geometry().voxelCount(); ++i)
        differences += back->acquired.labels.data<uint8_t>()[i] != labels.labels.data<uint8_t>()[i];
    EXPECT_EQ(differences, 0);

    // With a name -> value map and onto the series' grid (not resampled: the same planes).
    RtStructReadOptions mapped;
    mapped.label_values = {{"Liver", 7}};
    mapped.grid = series.candidate.geometry;
    auto on_grid = readRtStruct(path, series.candidate, mapped);
    ASSERT_TRUE(on_grid.isOk()) << on_grid.status().toString();
    ASSERT_TRUE(on_grid->grid_labels.has_value());
    differences = 0;
    for (int64_t i = 0; i < labels.labels.geometry().voxelCount(); ++i) {
        const uint8_t want = labels.labels.data<uint8_t>()[i];
        differences += on_grid->grid_labels->data<uint8_t>()[i] != (want == 1 ? 7 : want);
    }
    EXPECT_EQ(differences, 0);

    // A value above 255 makes the result uint16.
    RtStructReadOptions wide;
    wide.label_values = {{"Spleen", 300}};
    auto wide_back = readRtStruct(path, series.candidate, wide);
    ASSERT_TRUE(wide_back.isOk()) << wide_back.status().toString();
    ASSERT_EQ(wide_back->acquired.labels.pixelType(), PixelType::kUInt16);
    differences = 0;
    for (int64_t i = 0; i < labels.labels.geometry().voxelCount(); ++i) {
        const uint8_t want = labels.labels.data<uint8_t>()[i];
        differences += wide_back->acquired.labels.data<uint16_t>()[i] != (want == 3 ? 300 : want);
    }
    EXPECT_EQ(differences, 0);
}

TEST(RtStruct, TiltedSeriesRoundTripsOnTheAcquiredPlanes) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 20;
    spec.rows = 18;
    spec.slices = 6;
    spec.row_dir = {1, 0, 0};
    spec.col_dir = {0, std::cos(0.3), -std::sin(0.3)};
    spec.tilt_shift = {0, 0.9, 0};
    spec.slice_offsets = {0, 2, 4.5, 6.5, 9, 13};  // uneven, with a gap
    const Series series = writeSeries(dir, spec, "tilted");
    ASSERT_FALSE(series.candidate.slices.empty());
    const AcquiredLabels labels = makeLabels(series.candidate);
    const std::string path = dir / "rtss.dcm";
    auto report = writeRtStruct(labels, series.candidate,
                                describe({{1, "A"}, {2, "B"}, {3, "C"}, {4, "D"}, {5, "E"}}),
                                RtStructWriteOptions{}, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    auto back = readRtStruct(path, series.candidate);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_TRUE(back->warnings.empty()) << back->warnings.front();
    int64_t differences = 0;
    for (int64_t i = 0; i < labels.labels.geometry().voxelCount(); ++i)
        differences += back->acquired.labels.data<uint8_t>()[i] != labels.labels.data<uint8_t>()[i];
    EXPECT_EQ(differences, 0);
    // Onto the regular grid loadSeries() resamples this stack to: every label arrives.
    auto volume = loadSeries(series.candidate);
    ASSERT_TRUE(volume.isOk()) << volume.status().toString();
    auto on_grid =
        readRtStruct(path, series.candidate, RtStructReadOptions{.grid = volume->geometry()});
    ASSERT_TRUE(on_grid.isOk()) << on_grid.status().toString();
    ASSERT_TRUE(on_grid->grid_labels.has_value());
    EXPECT_TRUE(on_grid->grid_labels->geometry().approxEqual(volume->geometry()));
    std::set<int> on_grid_values;
    for (int64_t i = 0; i < volume->geometry().voxelCount(); ++i)
        on_grid_values.insert(on_grid->grid_labels->data<uint8_t>()[i]);
    // Labels 1..4 cover many pixels; the lone pixel of label 5 may fall between grid voxels.
    for (int v : {1, 2, 3, 4}) EXPECT_TRUE(on_grid_values.count(v)) << v;
    EXPECT_LE(*on_grid_values.rbegin(), 5);
    // Placed by geometry alone (references removed from the file): the same.
    DcmFileFormat f;
    ASSERT_TRUE(f.loadFile(path.c_str()).good());
    DcmSequenceOfItems* rc = nullptr;
    ASSERT_TRUE(f.getDataset()->findAndGetSequence(DCM_ROIContourSequence, rc).good());
    for (unsigned long i = 0; i < rc->card(); ++i) {
        DcmSequenceOfItems* cs = nullptr;
        ASSERT_TRUE(rc->getItem(i)->findAndGetSequence(DCM_ContourSequence, cs).good());
        for (unsigned long c = 0; c < cs->card(); ++c)
            cs->getItem(c)->findAndDeleteElement(DCM_ContourImageSequence);
    }
    const std::string bare = dir / "bare.dcm";
    ASSERT_TRUE(f.saveFile(bare.c_str(), EXS_LittleEndianExplicit).good());
    auto by_geometry = readRtStruct(bare, series.candidate);
    ASSERT_TRUE(by_geometry.isOk()) << by_geometry.status().toString();
    differences = 0;
    for (int64_t i = 0; i < labels.labels.geometry().voxelCount(); ++i)
        differences +=
            by_geometry->acquired.labels.data<uint8_t>()[i] != labels.labels.data<uint8_t>()[i];
    EXPECT_EQ(differences, 0);
}

using voxseg::testing::runCommand;

TEST(RtStruct, DciodvfyFindsNoErrors) {
    if (std::system("which dciodvfy > /dev/null 2>&1") != 0)
        GTEST_SKIP() << "dciodvfy (Debian package dicom3tools) is not installed";
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 24;
    spec.rows = 20;
    spec.slices = 4;
    const Series series = writeSeries(dir, spec, "ct");
    ASSERT_FALSE(series.candidate.slices.empty());
    const std::string path = dir / "rtss.dcm";
    auto report = writeRtStruct(makeLabels(series.candidate), series.candidate,
                                describe({{1, "Liver"}, {2, "Ring"}, {3, "Spleen"}}),
                                RtStructWriteOptions{}, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    const std::string verdict = runCommand("dciodvfy '" + path + "'");
    std::printf("dciodvfy:\n%s\n", verdict.c_str());
    EXPECT_NE(verdict.find("RTStructureSet"), std::string::npos) << verdict;  // it did run
    EXPECT_EQ(verdict.find("Error"), std::string::npos) << verdict;
}

// ---------------------------------------------------------------------------------------------
// Bad input

TEST(RtStruct, BadFilesGiveErrorsNamingThem) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 24;
    spec.rows = 20;
    spec.slices = 3;
    const Series series = writeSeries(dir, spec, "ct");
    ASSERT_FALSE(series.candidate.slices.empty());
    const std::string path = dir / "rtss.dcm";
    ASSERT_TRUE(writeRtStruct(makeLabels(series.candidate), series.candidate,
                              describe({{1, "Liver"}}), RtStructWriteOptions{}, path)
                    .isOk());

    // Truncated.
    const std::string truncated = dir / "truncated.dcm";
    {
        std::ifstream in(path, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::ofstream(truncated, std::ios::binary).write(bytes.data(), bytes.size() / 2);
    }
    auto r = readRtStruct(truncated, series.candidate);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().subject(), truncated);
    // Not DICOM at all.
    const std::string text = dir / "notes.txt";
    std::ofstream(text) << "not a DICOM file\n";
    r = readRtStruct(text, series.candidate);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().subject(), text);
    // A CT image, not an RTSTRUCT.
    r = readRtStruct(series.files.front(), series.candidate);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("not a DICOM RT Structure Set"), std::string::npos)
        << r.status().toString();
    // Another series (another frame of reference): both UIDs named.
    const Series other = writeSeries(dir, spec, "other");
    r = readRtStruct(path, other.candidate);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find(series.candidate.series_uid), std::string::npos)
        << r.status().toString();
    EXPECT_NE(r.status().message().find(other.candidate.series_uid), std::string::npos)
        << r.status().toString();
    // Writer: label map that does not match the planes.
    AcquiredLabels wrong = makeLabels(series.candidate);
    wrong.planes.slices.pop_back();
    auto w = writeRtStruct(wrong, series.candidate, {}, RtStructWriteOptions{}, dir / "w.dcm");
    EXPECT_FALSE(w.isOk());
    EXPECT_FALSE(fs::exists(dir / "w.dcm"));
}

// Adds a contour item to the ROIContourSequence item of `roi` (0-based).
void addContour(DcmDataset* ds, unsigned long roi, const std::string& type,
                const std::vector<double>& xyz) {
    DcmItem* rc = nullptr;
    ASSERT_TRUE(ds->findAndGetSequenceItem(DCM_ROIContourSequence, rc, roi).good());
    DcmItem* item = nullptr;
    ASSERT_TRUE(rc->findOrCreateSequenceItem(DCM_ContourSequence, item, -2).good());
    item->putAndInsertString(DCM_ContourGeometricType, type.c_str());
    item->putAndInsertString(DCM_NumberOfContourPoints, std::to_string(xyz.size() / 3).c_str());
    std::string data;
    for (double v : xyz) data += (data.empty() ? "" : "\\") + std::to_string(v);
    item->putAndInsertString(DCM_ContourData, data.c_str());
}

bool warned(const RtStructReadResult& r, const std::string& a, const std::string& b) {
    for (const auto& w : r.warnings)
        if (w.find(a) != std::string::npos && w.find(b) != std::string::npos) return true;
    return false;
}

TEST(RtStruct, BrokenContoursWarnNamingTheRoi) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 24;
    spec.rows = 20;
    spec.slices = 3;
    spec.slice_spacing = 2.0;
    const Series series = writeSeries(dir, spec, "ct");
    ASSERT_FALSE(series.candidate.slices.empty());
    const AcquiredLabels labels = makeLabels(series.candidate);
    const std::string path = dir / "rtss.dcm";
    ASSERT_TRUE(writeRtStruct(labels, series.candidate, describe({{1, "Liver"}, {2, "Ring"}}),
                              RtStructWriteOptions{}, path)
                    .isOk());
    DcmFileFormat f;
    ASSERT_TRUE(f.loadFile(path.c_str()).good());
    DcmDataset* ds = f.getDataset();
    const double z = series.candidate.slices[1].position[2];
    addContour(ds, 0, "CLOSED_PLANAR", {1, 1, z, 2, 2, z});                          // 2 points
    addContour(ds, 0, "CLOSED_PLANAR", {1, 1, z, 2, 2, z, 3, 3, z});                 // zero area
    addContour(ds, 0, "POINT", {1, 1, z});                                           // marker
    addContour(ds, 1, "OPEN_PLANAR", {1, 1, z, 5, 1, z, 5, 5, z});                   // open
    addContour(ds, 1, "CLOSED_PLANAR", {1, 1, z + 55, 5, 1, z + 55, 5, 5, z + 55});  // off slices
    addContour(ds, 1, "CLOSED_PLANAR", {1, 1, z, 5, 1, z, 5, 5, z + 0.9});           // not planar
    const std::string broken = dir / "broken.dcm";
    ASSERT_TRUE(f.saveFile(broken.c_str(), EXS_LittleEndianExplicit).good());

    auto r = readRtStruct(broken, series.candidate);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    for (const auto& w : r->warnings) std::printf("warning: %s\n", w.c_str());
    EXPECT_TRUE(warned(*r, "'Liver'", "fewer than 3 points"));
    EXPECT_TRUE(warned(*r, "'Liver'", "no area"));
    EXPECT_TRUE(warned(*r, "'Liver'", "POINT"));
    EXPECT_TRUE(warned(*r, "'Ring'", "open contour"));
    EXPECT_TRUE(warned(*r, "'Ring'", "lie on no image"));
    EXPECT_TRUE(warned(*r, "'Ring'", "not planar"));
    EXPECT_EQ(r->warnings.size(), 6u);
    // The good contours still land: every label as written.
    int64_t differences = 0;
    for (int64_t i = 0; i < labels.labels.geometry().voxelCount(); ++i)
        differences += r->acquired.labels.data<uint8_t>()[i] != labels.labels.data<uint8_t>()[i];
    EXPECT_EQ(differences, 0);
}

TEST(RtStruct, OverlappingRoisHigherNumberWins) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 16;
    spec.rows = 16;
    spec.slices = 2;
    spec.column_spacing = 1;
    spec.row_spacing = 1;
    const Series series = writeSeries(dir, spec, "ct");
    ASSERT_FALSE(series.candidate.slices.empty());
    AcquiredLabels labels = makeLabels(series.candidate);
    const std::string path = dir / "rtss.dcm";
    ASSERT_TRUE(writeRtStruct(labels, series.candidate, describe({{1, "A"}, {2, "B"}}),
                              RtStructWriteOptions{}, path)
                    .isOk());
    DcmFileFormat f;
    ASSERT_TRUE(f.loadFile(path.c_str()).good());
    // A 4x4 square of ROI 1 (A) over pixels 0..3 of slice 0, surely overlapping others.
    const Vec3 o = series.candidate.slices[0].position;
    const double z = o[2];
    addContour(f.getDataset(), 0, "CLOSED_PLANAR",
               {o[0] - 0.5, o[1] - 0.5, z, o[0] + 3.5, o[1] - 0.5, z, o[0] + 3.5, o[1] + 3.5, z,
                o[0] - 0.5, o[1] + 3.5, z});
    const std::string edited = dir / "edited.dcm";
    ASSERT_TRUE(f.saveFile(edited.c_str(), EXS_LittleEndianExplicit).good());
    auto r = readRtStruct(edited, series.candidate);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    // Expected: in the square, ROI 1's even-odd with its own pixels, then ROI 2 on top.
    const uint8_t* in = labels.labels.data<uint8_t>();
    int64_t expected_overlap = 0, differences = 0;
    for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 16; ++x) {
            const uint8_t orig = in[y * 16 + x];
            const bool square = x < 4 && y < 4;
            uint8_t want = orig == 1 ? 1 : 0;
            if (square) want = want ? 0 : 1;  // even-odd with the square
            if (orig >= 2) {                  // ROIs 2 and 3 are painted after ROI 1
                expected_overlap += want == 1;
                want = orig;
            }
            differences += r->acquired.labels.data<uint8_t>()[y * 16 + x] != want;
        }
    EXPECT_EQ(differences, 0);
    EXPECT_EQ(r->overlapping_voxels, expected_overlap);
}

// Issue 39 item 1: an RTSTRUCT's ROIGenerationAlgorithm is the ROI's provenance (the defined
// terms AUTOMATIC, SEMIAUTOMATIC, MANUAL; others dropped) and its ROIDescription is kept.
TEST(RtStruct, GenerationAlgorithmAndDescriptionOfAnyWriterAreRead) {
    TempDir dir;
    SynthSeriesSpec spec;
    spec.columns = 16;
    spec.rows = 16;
    spec.slices = 2;
    const Series series = writeSeries(dir, spec, "ct");
    ASSERT_FALSE(series.candidate.slices.empty());
    const std::string path = dir / "rtss.dcm";
    ASSERT_TRUE(writeRtStruct(makeLabels(series.candidate), series.candidate,
                              describe({{1, "A"}, {2, "B"}, {3, "C"}}), RtStructWriteOptions{},
                              path)
                    .isOk());
    DcmFileFormat f;
    ASSERT_TRUE(f.loadFile(path.c_str()).good());
    DcmSequenceOfItems* rois = nullptr;
    ASSERT_TRUE(f.getDataset()->findAndGetSequence(DCM_StructureSetROISequence, rois).good());
    ASSERT_GE(rois->card(), 3u);  // ROIs 1, 2, 3 first (makeLabels also has 4 and 5)
    rois->getItem(0)->putAndInsertString(DCM_ROIGenerationAlgorithm, "MANUAL");
    rois->getItem(0)->putAndInsertString(DCM_ROIDescription, "A; review: accepted");
    rois->getItem(1)->putAndInsertString(DCM_ROIGenerationAlgorithm, "SEMIAUTOMATIC");
    rois->getItem(2)->putAndInsertString(DCM_ROIGenerationAlgorithm, "AUTO-CONTOUR");
    const std::string edited = dir / "edited.dcm";
    ASSERT_TRUE(f.saveFile(edited.c_str(), EXS_LittleEndianExplicit).good());
    auto r = readRtStruct(edited, series.candidate);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_GE(r->rois.size(), 3u);
    EXPECT_EQ(r->rois[0].description.algorithm_type, "MANUAL");
    EXPECT_EQ(r->rois[0].description.description, "A; review: accepted");
    EXPECT_EQ(r->rois[1].description.algorithm_type, "SEMIAUTOMATIC");
    EXPECT_EQ(r->rois[2].generation_algorithm, "AUTO-CONTOUR");
    EXPECT_EQ(r->rois[2].description.algorithm_type, "");
}

// ---------------------------------------------------------------------------------------------
// plastimatch reads what voxseg writes

TEST(RtStruct, PlastimatchReadsItBackWithHighDice) {
    if (std::system("which plastimatch > /dev/null 2>&1") != 0)
        GTEST_SKIP() << "plastimatch (Debian package plastimatch, scripts/deps.sh) is not "
                        "installed";
    TempDir dir;
    // A CT-like 128 x 128 x 40 series, 1.5 x 1.5 x 3 mm.
    SynthSeriesSpec spec;
    spec.columns = 128;
    spec.rows = 128;
    spec.slices = 40;
    spec.column_spacing = 1.5;
    spec.row_spacing = 1.5;
    spec.slice_spacing = 3;
    spec.origin = {-96, -110, -60};
    spec.value = [](int i, int j, int) {
        const double r = std::hypot(i - 64.0, (j - 64.0) * 1.2);
        return r < 58 ? 40 : -1000;
    };
    const Series series = writeSeries(dir, spec, "ct");
    ASSERT_FALSE(series.candidate.slices.empty());
    AcquiredLabels labels;
    labels.planes = AcquiredPlanes::of(series.candidate);
    Geometry g = series.candidate.geometry;
    labels.labels = Volume::allocate<uint8_t>(g);
    struct Organ {
        int label;
        double cx, cy, cz, rx, ry, rz;  // mm, relative to the origin
        bool hollow;
    };
    const Organ organs[] = {
        {1, 60, 90, 60, 35, 28, 36, false},      // "liver"
        {2, 130, 90, 55, 18, 22, 24, false},     // "kidney"
        {3, 96, 60, 70, 22, 18, 30, true},       // hollow "bladder" (a shell with a cavity)
        {4, 96, 140, 45, 4.5, 4.5, 4.5, false},  // small nodule, < 1 mL
    };
    uint8_t* d = labels.labels.data<uint8_t>();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i)
                for (const Organ& o : organs) {
                    const double x = i * 1.5, y = j * 1.5, z = k * 3.0;
                    const double e = std::pow((x - o.cx) / o.rx, 2) +
                                     std::pow((y - o.cy) / o.ry, 2) +
                                     std::pow((z - o.cz) / o.rz, 2);
                    if (e <= 1 && !(o.hollow && e < 0.45))
                        d[(k * g.size[1] + j) * g.size[0] + i] = static_cast<uint8_t>(o.label);
                }
    const auto rois = describe({{1, "Liver"}, {2, "Kidney"}, {3, "Bladder"}, {4, "Nodule"}});
    const std::string path = dir / "rtss.dcm";
    auto report = writeRtStruct(labels, series.candidate, rois, RtStructWriteOptions{}, path);
    ASSERT_TRUE(report.isOk()) << report.status().toString();

    // plastimatch ORs the contours of a plane by default; holes written as separate contours
    // (the even-odd convention) need --xor-contours.
    const std::string out = dir / "masks";
    const std::string log =
        runCommand("plastimatch convert --input '" + path + "' --referenced-ct '" + series.folder +
                   "' --output-prefix '" + out + "' --prefix-format nrrd --xor-contours");
    ASSERT_TRUE(fs::exists(out)) << log;
    const double voxel_ml = 1.5 * 1.5 * 3 / 1000;
    for (const auto& roi : rois) {
        const std::string mask_path = out + "/" + roi.name + ".nrrd";
        ASSERT_TRUE(fs::exists(mask_path)) << mask_path << "\n" << log;
        auto mask = readImage(mask_path);
        ASSERT_TRUE(mask.isOk()) << mask.status().toString();
        ASSERT_TRUE(mask->geometry().approxEqual(g, 1e-2, 1e-4, 1e-4))
            << roi.name << ": plastimatch's grid differs from the series'";
        Volume m = mask->castTo(PixelType::kUInt8);
        int64_t a = 0, b = 0, both = 0;
        for (int64_t i = 0; i < g.voxelCount(); ++i) {
            const bool ours = d[i] == roi.value, theirs = m.data<uint8_t>()[i] != 0;
            a += ours, b += theirs, both += ours && theirs;
        }
        const double dice = 2.0 * both / static_cast<double>(a + b);
        const double ml = a * voxel_ml;
        std::printf("plastimatch Dice %-8s %.4f (%.2f mL, %lld vs %lld voxels)\n", roi.name.c_str(),
                    dice, ml, static_cast<long long>(a), static_cast<long long>(b));
        EXPECT_GE(dice, ml < 1 ? 0.95 : 0.98) << roi.name;
    }
}

}  // namespace
}  // namespace voxseg::io
