// Sequence nesting limit on real data (issue 35 item 2): no file of ../shared/data is refused
// by io/dicom_nesting (skips when the data is absent).
#include "io/dicom_nesting.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace voxseg::io {
namespace {

namespace fs = std::filesystem;

// Every file of ../shared/data (DICOM of many vendors, SEG, RTSTRUCT, label data) passes.
TEST(DicomNestingData, EveryFileOfTheSharedDataPasses) {
    VOXSEG_REQUIRE_DATA("");
    size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(testing::sharedData())) {
        if (!e.is_regular_file()) continue;
        ++files;
        const Status s = checkDicomNesting(e.path().string());
        EXPECT_TRUE(s.isOk()) << s.toString();
    }
    EXPECT_GT(files, 100u);
}

}  // namespace
}  // namespace voxseg::io
