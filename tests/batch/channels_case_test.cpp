// Issue 15 part 4 in `voxseg batch`: a manifest's channel:NAME columns reach the model. A CSV
// manifest of two cases of a two-channel package (tests/pipeline/test_channel_package.h): one
// names its T2 series in a column, the other leaves both channels to model.json's rules; each goes
// through the loader / inferer / writer parts batch runs, and its label map holds both labels
// where the synthetic study has them.
#include "batch/case_stages.h"
#include "batch/manifest.h"
#include "io/image_io.h"

#include "tests/pipeline/test_channel_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace voxseg::batch {
namespace {
namespace fs = std::filesystem;

constexpr auto dice = testing::diceWithCuboid;

TEST(BatchChannels, ManifestChannelColumnsReachTheModel) {
    voxseg::testing::TempDir dir;
    const std::string study = io::makeDicomUid(), frame = io::makeDicomUid();
    // Case c1: the T1 series alone in its folder, T2 named by the manifest (another folder).
    ASSERT_TRUE(
        io::writeSynthSeries(testing::t1Spec(study, frame), (dir.path() / "c1" / "t1").string())
            .isOk());
    ASSERT_TRUE(
        io::writeSynthSeries(testing::t2Spec(study, frame), (dir.path() / "c1t2").string()).isOk());
    // Case c2: both series in one study folder, picked by the rules.
    ASSERT_TRUE(
        io::writeSynthSeries(testing::t1Spec(study, frame), (dir.path() / "c2" / "a").string())
            .isOk());
    ASSERT_TRUE(
        io::writeSynthSeries(testing::t2Spec(study, frame), (dir.path() / "c2" / "b").string())
            .isOk());
    std::ofstream(dir.path() / "cases.csv") << "case_id,input,channel:T2\n"
                                               "c1,c1/t1,c1t2\n"
                                               "c2,c2,\n";
    auto cases = readManifest((dir.path() / "cases.csv").string());
    ASSERT_TRUE(cases.isOk()) << cases.status().toString();
    ASSERT_EQ(cases->size(), 2u);

    pipeline::SegmentOptions so;
    so.outputs.preview = false;
    auto segmenter = pipeline::Segmenter::create(
        testing::writeTwoChannelPackage(dir.path() / "pkg", testing::kT1Rule), so);
    ASSERT_TRUE(segmenter.isOk()) << segmenter.status().toString();
    for (const BatchCase& c : *cases) {
        SCOPED_TRACE(c.id);
        CaseWork w;
        w.c = c;
        ASSERT_TRUE(loadCase(w, *segmenter, LoadPolicy{}, CancelToken()).isOk());
        ASSERT_EQ(w.input.extra_channels.size(), 1u);
        ASSERT_TRUE(inferCase(w, *segmenter).isOk());
        const CaseFolders folders{(dir.path() / ("staging-" + c.id)).string(),
                                  (dir.path() / ("out-" + c.id)).string(),
                                  (dir.path() / ("trash-" + c.id)).string()};
        auto files = writeCase(w, *segmenter, folders);
        ASSERT_TRUE(files.isOk()) << files.status().toString();
        auto labels = io::readImage((fs::path(folders.final_dir) / "segmentation.nii.gz").string());
        ASSERT_TRUE(labels.isOk()) << labels.status().toString();
        EXPECT_GT(dice(*labels, 1), 0.9);
        EXPECT_GT(dice(*labels, 2), 0.9);
    }
}

}  // namespace
}  // namespace voxseg::batch
