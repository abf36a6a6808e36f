// What every libFuzzer target of tests/fuzz shares: silent logs (voxseg's and DCMTK's) and a
// scratch file for entry points that take a path. Built only with -DVOXSEG_FUZZ=ON (clang).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace voxseg::fuzz {

// Turns voxseg's log and DCMTK's oflog off (once; cheap to call on every input).
void quietLogs();

// Writes the input to `file_name` in this process's scratch folder and returns its path. The
// name selects the reader where the entry point dispatches on it ("input.nii.gz", "DICOMDIR").
// Aborts when the file cannot be written: that is the harness failing, not the code under test.
std::string writeInputFile(const uint8_t* data, size_t size, const std::string& file_name);

// This process's scratch folder ("/dev/shm/voxseg-fuzz-<pid>", or under $TMPDIR without
// /dev/shm; created on first use, removed at exit).
const std::string& scratchDir();

// Where LLVMFuzzerInitialize may add seeds it generates (env VOXSEG_FUZZ_SEED_DIR; set by
// scripts/fuzz.sh to the run's temporary corpus), or empty.
std::string seedDir();

}  // namespace voxseg::fuzz
