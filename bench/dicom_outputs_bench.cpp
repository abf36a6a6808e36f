// The DICOM outputs of one label map, each writer alone, in one process (docs/perf-segment.md):
// mapping onto the acquired images, BINARY SEG, Label Map SEG, RTSTRUCT, and the SEG + RTSTRUCT
// pair side by side as `voxseg segment` writes them. Median of N runs, wall seconds.
//
//   voxseg_bench_dicom_outputs <dicom series folder> <label map on its loaded grid> [runs]
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/image_io.h"
#include "io/rtstruct_writer.h"
#include "io/seg_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace voxseg;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double seconds(const std::function<void()>& fn) {
    const auto t = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void check(const Status& s) {
    if (!s.isOk()) {
        std::fprintf(stderr, "%s\n", s.toString().c_str());
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s <dicom series> <label map> [runs]\n", argv[0]);
        return 2;
    }
    const int runs = argc > 3 ? std::atoi(argv[3]) : 5;
    auto scan = io::scanDicom({argv[1]});
    check(scan.status());
    const io::SeriesCandidate& c = scan->series.at(0);
    auto labels = io::readImage(argv[2]);
    check(labels.status());
    Volume map =
        labels->pixelType() == PixelType::kUInt8 || labels->pixelType() == PixelType::kUInt16
            ? *labels
            : labels->castTo(PixelType::kUInt8);
    const std::string dir = std::filesystem::temp_directory_path() / "voxseg-dicom-outputs-bench";
    std::filesystem::create_directories(dir);
    std::vector<io::SegmentDescription> segments;
    std::vector<bool> present(65536);
    visitPixels(map, [&](const auto* p) {
        for (int64_t i = 0; i < map.geometry().voxelCount(); ++i) present[p[i]] = true;
    });
    for (int v = 1; v < 65536; ++v) {
        if (!present[v]) continue;
        io::SegmentDescription d;
        d.value = v;
        d.name = "label " + std::to_string(v);
        segments.push_back(d);
    }
    std::vector<double> map_s, seg_s, lm_s, rt_s, pair_s;
    for (int r = 0; r < runs; ++r) {
        Result<io::AcquiredLabels> acquired = io::labelsOnAcquiredImages(map, c);
        map_s.push_back(seconds([&] { acquired = io::labelsOnAcquiredImages(map, c); }));
        check(acquired.status());
        io::SegWriteOptions binary, label_map;
        label_map.type = io::SegType::kLabelMap;
        seg_s.push_back(seconds([&] {
            check(io::writeDicomSeg(*acquired, c, segments, binary, dir + "/seg.dcm").status());
        }));
        lm_s.push_back(seconds([&] {
            check(io::writeDicomSeg(*acquired, c, segments, label_map, dir + "/lm.dcm").status());
        }));
        rt_s.push_back(seconds([&] {
            check(io::writeRtStruct(*acquired, c, segments, {}, dir + "/rt.dcm").status());
        }));
        pair_s.push_back(seconds([&] {
            std::thread t([&] {
                check(io::writeRtStruct(*acquired, c, segments, {}, dir + "/rt2.dcm").status());
            });
            check(io::writeDicomSeg(*acquired, c, segments, binary, dir + "/seg2.dcm").status());
            t.join();
        }));
    }
    std::filesystem::remove_all(dir);
    std::printf("| step | median s (%d runs) |\n|---|---:|\n", runs);
    std::printf("| labels onto the acquired images | %.3f |\n", median(map_s));
    std::printf("| BINARY SEG | %.3f |\n", median(seg_s));
    std::printf("| Label Map SEG | %.3f |\n", median(lm_s));
    std::printf("| RTSTRUCT | %.3f |\n", median(rt_s));
    std::printf("| SEG + RTSTRUCT side by side | %.3f |\n", median(pair_s));
    return 0;
}
