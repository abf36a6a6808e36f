// libFuzzer target for the image file readers (ITK's NIfTI, NRRD and MetaImage IO behind
// voxseg's readImageHeader / readImage). Built once per format: VOXSEG_FUZZ_IMAGE_EXT is the
// extension (".nii", ".nii.gz", ".nrrd", ".mha") that selects the reader. Volumes over 2^22
// voxels are checked by the header but not read, so the fuzzer explores parsing, not memory.
#include "io/image_io.h"
#include "tests/fuzz/fuzz_support.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    const std::string path =
        voxseg::fuzz::writeInputFile(data, size, std::string("input") + VOXSEG_FUZZ_IMAGE_EXT);
    auto header = voxseg::io::readImageHeader(path);
    if (!header.isOk() || header->geometry.voxelCount() > (int64_t{1} << 22)) return 0;
    (void)voxseg::io::readImage(path);
    return 0;
}
