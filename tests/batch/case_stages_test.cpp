// The loader / inferer / writer parts that `voxseg batch` and `voxseg serve` share, one case
// at a time on the golden PlainConvUNet: the final folder holds exactly the outputs, an older
// output is replaced whole, nothing is left in staging, and failures come back as a Status.
#include "batch/case_stages.h"

#include "tests/batch/batch_test_util.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

namespace voxseg::batch {
namespace {
namespace fs = std::filesystem;

struct Stages {
    voxseg::testing::TempDir dir;
    std::optional<pipeline::Segmenter> segmenter;
    Stages() {
        pipeline::SegmentOptions so;
        so.threads = 2;
        so.outputs.preview = false;
        auto s = pipeline::Segmenter::create(testing::makePackage(dir.path()), so);
        EXPECT_TRUE(s.isOk()) << s.status().toString();
        if (s.isOk()) segmenter.emplace(std::move(*s));
    }
    CaseFolders folders(const std::string& id) const {
        return {dir / ("staging-" + id), dir / ("out-" + id), dir / ("trash-" + id)};
    }
    Result<std::vector<OutputFile>> runCase(const std::string& id, const std::string& input) {
        CaseWork w;
        w.c = {id, input, ""};
        VOXSEG_RETURN_IF_ERROR(loadCase(w, *segmenter, LoadPolicy{}, CancelToken()));
        EXPECT_GT(w.stages.count("load"), 0u);
        VOXSEG_RETURN_IF_ERROR(inferCase(w, *segmenter));
        auto files = writeCase(w, *segmenter, folders(id));
        EXPECT_GT(w.stages.count("write"), 0u);
        EXPECT_TRUE(w.input.volume.empty());  // released after writing
        return files;
    }
};

TEST(CaseStages, OneCaseThroughTheThreePartsEndsInItsFinalFolder) {
    Stages s;
    ASSERT_TRUE(s.segmenter);
    const std::string in = s.dir / "c.nii.gz";
    ASSERT_TRUE(io::writeImage(testing::makeVolume(7), in).isOk());
    auto files = s.runCase("a", in);
    ASSERT_TRUE(files.isOk()) << files.status().toString();
    EXPECT_EQ(files->size(), listOutputs(s.folders("a").final_dir).size());
    std::set<std::string> names;
    for (const auto& f : *files) names.insert(f.name);
    EXPECT_TRUE(names.count("segmentation.nii.gz")) << names.size();
    EXPECT_TRUE(names.count("statistics.json"));
    EXPECT_FALSE(fs::exists(s.folders("a").staging));

    // A second run replaces the folder whole: a stray file of the old one disappears.
    std::ofstream(s.folders("a").final_dir + "/stale.txt") << "old";
    files = s.runCase("a", in);
    ASSERT_TRUE(files.isOk()) << files.status().toString();
    EXPECT_FALSE(fs::exists(s.folders("a").final_dir + "/stale.txt"));
    EXPECT_FALSE(fs::exists(s.folders("a").trash));
}

TEST(CaseStages, UnreadableInputIsAStatusAndWritesNothing) {
    Stages s;
    ASSERT_TRUE(s.segmenter);
    std::ofstream(s.dir / "bad.nii.gz") << "not an image";
    auto files = s.runCase("bad", s.dir / "bad.nii.gz");
    ASSERT_FALSE(files.isOk());
    EXPECT_NE(files.status().toString().find("bad.nii.gz"), std::string::npos)
        << files.status().toString();
    EXPECT_FALSE(fs::exists(s.folders("bad").final_dir));
}

}  // namespace
}  // namespace voxseg::batch
