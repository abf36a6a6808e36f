// libFuzzer target: series.json, which the node writes beside the instances of each series it
// receives and reads back (Spool::readSeries) to route the series, also after a restart.
#include "node/spool.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    (void)voxseg::fuzz::writeInputFile(data, size, "series.json");
    (void)voxseg::node::Spool::readSeries(voxseg::fuzz::scratchDir());
    return 0;
}
