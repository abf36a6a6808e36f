// libFuzzer target: the DICOM node's configuration (node.json, `voxseg serve --config`), as
// parseNodeConfig validates it.
#include "node/config.h"
#include "tests/fuzz/fuzz_support.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    const std::string text(reinterpret_cast<const char*>(data), size);
    (void)voxseg::node::parseNodeConfig(text, "node.json", "/etc/voxseg");
    return 0;
}
