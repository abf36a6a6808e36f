#include "tests/fuzz/fuzz_reference_series.h"

#include "io/acquired_labels.h"
#include "io/dicom_synth.h"
#include "io/rtstruct_writer.h"
#include "io/seg_writer.h"
#include "tests/fuzz/fuzz_support.h"

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace voxseg::fuzz {

namespace {

io::SeriesCandidate makeSeries() {
    io::SynthSeriesSpec spec;
    spec.series_uid = "1.2.826.0.1.3680043.10.1452.1";
    spec.study_uid = "1.2.826.0.1.3680043.10.1452.2";
    spec.frame_of_reference_uid = "1.2.826.0.1.3680043.10.1452.3";
    spec.slices = 6;
    auto files = io::writeSynthSeries(spec, scratchDir() + "/reference");
    if (!files.isOk()) std::abort();
    io::DicomScanOptions options;
    options.threads = 1;
    auto scan = io::scanDicom({scratchDir() + "/reference"}, options);
    if (!scan.isOk() || scan->series.size() != 1) std::abort();
    return scan->series.front();
}

// Three labels: a block (1), a ring with a hole (2) and a single pixel (3).
io::AcquiredLabels makeLabels(const io::SeriesCandidate& series) {
    io::AcquiredLabels a;
    a.planes = io::AcquiredPlanes::of(series);
    Geometry g = series.geometry;
    const int c = a.planes.columns, r = a.planes.rows;
    g.size = {c, r, static_cast<int64_t>(a.planes.planeCount())};
    a.labels = Volume::allocate<uint8_t>(g);
    uint8_t* d = a.labels.data<uint8_t>();
    for (int64_t k = 0; k < g.size[2]; ++k)
        for (int y = 0; y < r; ++y)
            for (int x = 0; x < c; ++x) {
                uint8_t v = 0;
                if (k >= 1 && k <= 3 && x >= 2 && x < 7 && y >= 2 && y < 6) v = 1;
                const bool ring = x >= 8 && x < 14 && y >= 3 && y < 10;
                const bool hole = x >= 10 && x < 12 && y >= 5 && y < 8;
                if (k >= 2 && ring && !hole) v = 2;
                if (k == 4 && x == 1 && y == r - 2) v = 3;
                d[(k * r + y) * c + x] = v;
            }
    return a;
}

std::vector<io::SegmentDescription> describe() {
    std::vector<io::SegmentDescription> out;
    for (int v : {1, 2, 3}) {
        io::SegmentDescription s;
        s.value = v;
        s.name = "structure " + std::to_string(v);
        out.push_back(s);
    }
    return out;
}

}  // namespace

const io::SeriesCandidate& referenceSeries() {
    static const io::SeriesCandidate series = makeSeries();
    return series;
}

void writeReferenceSeeds(const std::string& kind, const std::string& folder) {
    const io::SeriesCandidate& series = referenceSeries();
    const io::AcquiredLabels labels = makeLabels(series);
    bool ok = true;
    if (kind == "seg") {
        io::SegWriteOptions options;
        ok = io::writeDicomSeg(labels, series, describe(), options, folder + "/seed-binary.dcm")
                 .isOk();
        options.type = io::SegType::kLabelMap;
        ok = ok &&
             io::writeDicomSeg(labels, series, describe(), options, folder + "/seed-labelmap.dcm")
                 .isOk();
    } else {
        io::RtStructWriteOptions options;
        options.threads = 1;
        ok = io::writeRtStruct(labels, series, describe(), options, folder + "/seed-rtss.dcm")
                 .isOk();
    }
    if (!ok) std::abort();
}

int initialiseWithReferenceSeeds(const std::string& kind) {
    quietLogs();
    if (const std::string seeds = seedDir(); !seeds.empty()) writeReferenceSeeds(kind, seeds);
    return 0;
}

}  // namespace voxseg::fuzz
