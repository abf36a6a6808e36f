// Where the tests find the source tree, ../shared/data and the built programs. The paths are
// compiled into one object (tests/test_paths.cpp, library voxseg_test_paths) instead of every
// test's command line: a test's object then does not depend on the folder of the checkout, and
// ccache hands CI (a fresh clone in another folder) what a developer's build compiled. Every test
// target gets this header force-included (voxseg_test_target in tests/CMakeLists.txt), so the
// names below work as the compile definitions they replace did.
#pragma once

namespace voxseg::testing {
const char* testSourceDir();      // the repository root
const char* testSharedDataDir();  // ../shared/data (VOXSEG_SHARED_DATA overrides: test_data.h)
const char* testVoxsegBin();      // the built `voxseg`, "" when this build has none
const char* testViewerBin();      // the built `voxseg-viewer`, "" when this build has none
}  // namespace voxseg::testing

#define VOXSEG_SOURCE_DIR (::voxseg::testing::testSourceDir())
#define VOXSEG_SHARED_DATA_DIR (::voxseg::testing::testSharedDataDir())
#define VOXSEG_BIN (::voxseg::testing::testVoxsegBin())
#define VOXSEG_VIEWER_BIN (::voxseg::testing::testViewerBin())
