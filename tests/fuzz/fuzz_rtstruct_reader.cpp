// libFuzzer target: an RT Structure Set as `voxseg convert <rtss.dcm> --referenced <series>`
// reads it against the reference series (fuzz_reference_series.h): ROI and contour sequences,
// references, scan conversion onto the acquired planes and onto the series' grid. Seeds: an
// RTSTRUCT voxseg writes on that series (added at start-up) and those of ../shared/data.
#include "io/rtstruct_reader.h"
#include "tests/fuzz/fuzz_reference_series.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    return voxseg::fuzz::initialiseWithReferenceSeeds("rtstruct");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = voxseg::fuzz::writeInputFile(data, size, "rtss.dcm");
    const voxseg::io::SeriesCandidate& series = voxseg::fuzz::referenceSeries();
    (void)voxseg::io::isRtStruct(path);
    voxseg::io::RtStructReadOptions options;
    options.grid = series.geometry;
    options.threads = 1;
    (void)voxseg::io::readRtStruct(path, series, options);
    return 0;
}
