// The viewer's label-table update after an edit on a 512x512x300 CT (issue 39 item 6): the copy of
// the label map and pipeline::computeStatistics (voxels, mL, mean / SD / min / max of the image
// per label) that EditController runs on a worker thread, timed on the calling thread. 31 labels
// (boxes) cover about a third of the volume. Prints the median and max of `repeats` runs.
//   voxseg_bench_label_statistics [repeats=5]
#include "core/volume.h"
#include "pipeline/statistics.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace voxseg;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
    const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    Geometry g;
    g.size = {512, 512, 300};
    g.spacing = {0.7, 0.7, 1.0};
    VolumeInfo info;
    info.modality = "CT";
    Volume image = Volume::allocate<int16_t>(g, info);
    Volume labels = Volume::allocate<uint8_t>(g);
    int16_t* im = image.data<int16_t>();
    uint8_t* lab = labels.data<uint8_t>();
    std::vector<LabelInfo> infos;
    for (int v = 1; v <= 31; ++v) infos.push_back({v, "label " + std::to_string(v)});
    int64_t idx = 0;
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
            for (int64_t i = 0; i < g.size[0]; ++i, ++idx) {
                im[idx] = static_cast<int16_t>((i * 7 + j * 3 + k) % 1400 - 1000);
                // 31 boxes on a 4x4x2 lattice over the middle of the volume.
                const int64_t bi = (i - 64) / 96, bj = (j - 64) / 96, bk = (k - 30) / 120;
                const bool in = i >= 64 && j >= 64 && k >= 30 && bi < 4 && bj < 4 && bk < 2;
                lab[idx] = in ? static_cast<uint8_t>(1 + (bi + 4 * bj + 16 * bk) % 31) : 0;
            }
    std::vector<double> copy_ms, stats_ms;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = Clock::now();
        const Volume copy = cloneVolume(labels);
        const auto t1 = Clock::now();
        auto report = pipeline::computeStatistics(copy, &image, infos);
        const auto t2 = Clock::now();
        if (!report.isOk()) {
            std::fprintf(stderr, "%s\n", report.status().toString().c_str());
            return 1;
        }
        copy_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        stats_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    auto show = [](const char* name, std::vector<double> t) {
        std::sort(t.begin(), t.end());
        std::printf("%-44s median %8.1f ms  max %8.1f ms\n", name, t[t.size() / 2], t.back());
    };
    std::printf("512x512x300 int16 CT, uint8 map, 31 labels, %d runs\n", repeats);
    show("label map copy (cloneVolume)", copy_ms);
    show("pipeline::computeStatistics (with intensity)", stats_ms);
    return 0;
}
