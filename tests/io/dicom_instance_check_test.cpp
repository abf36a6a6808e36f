// io/dicom_instance_check: what the node's C-STORE checks find in an instance (issue 35 item 5).
#include "io/dicom_instance_check.h"

#include "core/limits.h"
#include "io/dicom_synth.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;

class InstanceCheckTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("voxseg-instance-check-" +
                std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        SynthSeriesSpec spec;
        spec.slices = 1;
        auto files = writeSynthSeries(spec, dir_.string());
        ASSERT_TRUE(files.isOk()) << files.status().toString();
        file_ = files->front();
    }
    void TearDown() override { fs::remove_all(dir_); }

    // Rewrites the file after `edit` changed its data set.
    template <typename Edit>
    void rewrite(Edit edit) {
        DcmFileFormat ff;
        ASSERT_TRUE(ff.loadFile(file_.c_str()).good());
        edit(*ff.getDataset());
        ASSERT_TRUE(ff.saveFile(file_.c_str(), EXS_LittleEndianExplicit).good());
    }

    fs::path dir_;
    std::string file_;
};

TEST_F(InstanceCheckTest, AGoodInstancePasses) {
    EXPECT_TRUE(checkInstanceNesting(file_, "good").ok());
    EXPECT_TRUE(checkInstancePixels(file_, "good").ok());
}

TEST_F(InstanceCheckTest, TruncatedPixelDataIsAPixelDataProblem) {
    rewrite([](DcmDataset& ds) {
        std::vector<Uint16> shorter(16 * 12 - 8, 7);  // 8 pixels short of 16 x 12
        ASSERT_TRUE(ds.putAndInsertUint16Array(DCM_PixelData, shorter.data(),
                                               static_cast<unsigned long>(shorter.size()))
                        .good());
    });
    const InstanceCheck c = checkInstancePixels(file_, "SOP instance 1.2.3");
    EXPECT_EQ(c.problem, InstanceProblem::kPixelData) << c.status.toString();
    EXPECT_EQ(c.status.subject(), "SOP instance 1.2.3");
    EXPECT_EQ(c.status.message().find(file_), std::string::npos) << "names the temporary file";
}

TEST_F(InstanceCheckTest, NoPixelDataIsUnsupported) {
    rewrite([](DcmDataset& ds) { delete ds.remove(DCM_PixelData); });
    EXPECT_EQ(checkInstancePixels(file_, "x").problem, InstanceProblem::kUnsupported);
}

TEST_F(InstanceCheckTest, NestingOverTheLimitIsTooDeep) {
    rewrite([](DcmDataset& ds) {
        DcmItem* item = &ds;
        for (int level = 0; level < kMaxNestingDepth + 10; ++level) {
            DcmItem* next = nullptr;
            ASSERT_TRUE(
                item->findOrCreateSequenceItem(DCM_ReferencedImageSequence, next, 0).good());
            item = next;
        }
    });
    const InstanceCheck c = checkInstanceNesting(file_, "deep");
    EXPECT_EQ(c.problem, InstanceProblem::kTooDeep) << c.status.toString();
}

TEST(InstanceLimits, ClaimsOverTheReadLimitsAreOverLimit) {
    PixelFormat ok{512, 512, 1, 1, 16};
    EXPECT_TRUE(checkInstanceLimits(ok, "x").ok());
    PixelFormat frames = ok;
    frames.frames = readLimits().frames_per_file + 1;
    EXPECT_EQ(checkInstanceLimits(frames, "x").problem, InstanceProblem::kOverLimit);
    PixelFormat huge{65535, 65535, 1, 3, 32};  // 51 GB a frame
    const InstanceCheck c = checkInstanceLimits(huge, "x");
    EXPECT_EQ(c.problem, InstanceProblem::kOverLimit);
    EXPECT_NE(c.status.message().find("--max-frame-bytes"), std::string::npos);
}

}  // namespace
}  // namespace voxseg::io
