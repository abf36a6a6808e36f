// libFuzzer target: an instance the DICOM node received, as its job loads it once the series
// is complete: the file lies alone in a spool job folder and pipeline::loadStudy (what
// batch::loadCase runs for the node) scans the folder, selects the series and decodes it into
// a volume (stacking, rescale, resampling of tilted or uneven stacks). The voxel limit is
// lowered to 2^22 so that the fuzzer spends its time on parsing, not on large valid volumes.
#include "pipeline/segment.h"
#include "tests/fuzz/fuzz_support.h"

#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    const std::string job = voxseg::fuzz::scratchDir() + "/queue-job";
    std::filesystem::create_directories(job);
    std::filesystem::rename(voxseg::fuzz::writeInputFile(data, size, "instance.dcm"),
                            job + "/1.2.3.dcm");
    voxseg::io::DicomLoadOptions options;
    options.max_voxels = int64_t{1} << 22;
    options.threads = 1;
    (void)voxseg::pipeline::loadStudy(job, "", options);
    return 0;
}
