// libFuzzer target: a batch journal (journal-*.jsonl, also the node's state/journal.jsonl) as a
// resumed run reads it back, torn last lines and all (readJournalFile, then readJournals over
// the folder holding it).
#include "batch/journal.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    const std::string path = voxseg::fuzz::writeInputFile(data, size, "journal-fuzz.jsonl");
    int skipped = 0;
    (void)voxseg::batch::readJournalFile(path, &skipped);
    (void)voxseg::batch::readJournals(voxseg::fuzz::scratchDir());
    return 0;
}
