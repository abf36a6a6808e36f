// libFuzzer target: one file as `voxseg info <file>` reads it. scanDicom() recognises DICOM by
// content, reads the header (readDicomHeaders: classic, enhanced multi-frame, mosaic) and groups
// the frames into series candidates, stopping before the pixel data.
#include "io/dicom_series.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    const std::string path = voxseg::fuzz::writeInputFile(data, size, "input.dcm");
    voxseg::io::DicomScanOptions options;
    options.threads = 1;
    (void)voxseg::io::scanDicom({path}, options);
    return 0;
}
