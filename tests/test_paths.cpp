// The one object that holds the build's absolute paths (tests/test_paths.h says why).
#include "tests/test_paths.h"

namespace voxseg::testing {
const char* testSourceDir() { return VOXSEG_TEST_SOURCE_DIR; }
const char* testSharedDataDir() { return VOXSEG_TEST_SHARED_DATA_DIR; }
const char* testVoxsegBin() { return VOXSEG_TEST_VOXSEG_BIN; }
const char* testViewerBin() { return VOXSEG_TEST_VIEWER_BIN; }
}  // namespace voxseg::testing
