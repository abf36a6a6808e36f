// Every NRRD of ../shared/data (3D Slicer's gzip files: pyradiomics' images and labels, dcmqi's
// segmentations) reads through voxseg's own data path exactly as ITK's reader reads it:
// geometry bit for bit, every voxel (io/nrrd_data.h). Label data: skips without ../shared/data.
#include "tests/io/nrrd_reference.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;

TEST(NrrdDataOnSharedData, EveryNrrdReadsAsItkReadsIt) {
    VOXSEG_REQUIRE_DATA("pyradiomics-data");
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(voxseg::testing::sharedData()))
        if (e.is_regular_file() &&
            (e.path().extension() == ".nrrd" || e.path().extension() == ".nhdr"))
            files.push_back(e.path());
    ASSERT_GE(files.size(), 8u) << "the NRRD files of ../shared/data went missing";
    for (const fs::path& f : files) {
        auto header = readImageHeader(f.string());
        ASSERT_TRUE(header.isOk()) << header.status().toString();
        expectSameAsItk(f.string(), header->pixel_type);
    }
}

}  // namespace
}  // namespace voxseg::io
