// The image series the SEG and RTSTRUCT fuzz targets read their inputs against: a small
// synthetic CT (16 x 12 x 6, fixed UIDs) written once per process, and seeds made on it with
// voxseg's own writers (a binary SEG, a label-map SEG and an RTSTRUCT of three labels), so
// that mutated inputs reach the placement of frames and contours, not only the UID checks.
#pragma once

#include "io/dicom_series.h"

#include <string>

namespace voxseg::fuzz {

// The series (scanned from its files in the scratch folder); aborts when it cannot be made.
const io::SeriesCandidate& referenceSeries();

// Writes the seeds into `folder` (scripts/fuzz.sh passes the run's corpus through
// VOXSEG_FUZZ_SEED_DIR); "seg" or "rtstruct".
void writeReferenceSeeds(const std::string& kind, const std::string& folder);

// What the targets' LLVMFuzzerInitialize does: quiet logs, then the seeds of `kind` into
// seedDir() when it is set. Returns 0.
int initialiseWithReferenceSeeds(const std::string& kind);

}  // namespace voxseg::fuzz
