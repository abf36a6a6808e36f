// libFuzzer target for batch manifests, built once per format: VOXSEG_FUZZ_MANIFEST_JSONL = 1
// parses JSON lines (parseJsonLinesManifest), 0 CSV (parseCsvManifest), as readManifest() does
// after reading the file. The row limit is lowered so that the fuzzer does not spend its time
// on long (valid) manifests.
#include "batch/manifest.h"
#include "tests/fuzz/fuzz_support.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    const std::string text(reinterpret_cast<const char*>(data), size);
    constexpr size_t kRows = 1000;
    if (VOXSEG_FUZZ_MANIFEST_JSONL)
        (void)voxseg::batch::parseJsonLinesManifest(text, "/cases", "cases.jsonl", kRows);
    else
        (void)voxseg::batch::parseCsvManifest(text, "/cases", "cases.csv", kRows);
    return 0;
}
