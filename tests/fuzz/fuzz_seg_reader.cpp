// libFuzzer target: a DICOM SEG (binary, fractional or label map) as `voxseg edit --labels` and
// `convert` read it: readDicomSeg alone (frames placed by their own geometry), then onto the
// acquired images of the reference series (fuzz_reference_series.h). Seeds: SEGs voxseg writes
// on that series (added at start-up) and the SEG files of ../shared/data.
#include "io/seg_reader.h"
#include "tests/fuzz/fuzz_reference_series.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    return voxseg::fuzz::initialiseWithReferenceSeeds("seg");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = voxseg::fuzz::writeInputFile(data, size, "seg.dcm");
    (void)voxseg::io::readDicomSeg(path);
    voxseg::io::SegReadOptions options;
    options.source = &voxseg::fuzz::referenceSeries();
    (void)voxseg::io::readDicomSeg(path, options);
    return 0;
}
