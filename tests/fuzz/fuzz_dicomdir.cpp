// libFuzzer target: a DICOMDIR as `voxseg info DICOMDIR` reads it (readDicomdir: the directory
// records and the file IDs they reference, resolved against the DICOMDIR's folder, which must
// not let them escape it).
#include "io/dicom_header.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    (void)voxseg::io::readDicomdir(voxseg::fuzz::writeInputFile(data, size, "DICOMDIR"));
    return 0;
}
