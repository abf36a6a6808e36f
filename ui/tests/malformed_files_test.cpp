// Issue 19 part 7: the viewer opens every malformed file of ../shared/data (pydicom's test
// files: truncated, wrong lengths, bad transfer syntaxes, deflate, DICOMDIR variants...) and
// every input the fuzzers found crashing (tests/fuzz/regressions) the way a user would (a file
// dropped on the window, or a segmentation loaded over an image), and each ends in an image or
// an error message; the window then still opens a good series. The sanitizer configuration
// (scripts/test.sh) runs this under AddressSanitizer + UBSan.
#include "tests/test_data.h"
#include "ui/tests/viewer_test_support.h"
#include "ui/main_window.h"
#include "ui/viewer_state.h"

#include <gtest/gtest.h>

#include <QTest>

#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

namespace voxseg::ui {
namespace {
namespace fs = std::filesystem;

std::unique_ptr<MainWindow> makeWindow() {
    auto w = std::make_unique<MainWindow>();
    w->setInteractive(false);
    w->resize(1000, 700);
    w->show();
    EXPECT_TRUE(QTest::qWaitForWindowExposed(w.get()));
    return w;
}

// Opens `path` as a drop on the window does; false when it did not finish in time.
bool openLikeADrop(MainWindow& w, const std::string& path, std::map<std::string, int>& outcome) {
    const TaskResult r = runTask(
        w, [&] { w.openPath(QString::fromStdString(path)); }, 60000);
    if (!r.finished) return false;
    if (r.ok) {
        ++outcome["opened (or series listed)"];
    } else {
        ++outcome["error shown"];
        EXPECT_FALSE(w.lastError().isEmpty()) << path;
    }
    return true;
}

TEST(MalformedFiles, EveryMalformedDataFileEndsInAnImageOrAnError) {
    VOXSEG_REQUIRE_DATA("pydicom-test-files");
    std::vector<fs::path> files;
    for (const char* folder : {"pydicom-test-files", "pydicom-data"}) {
        const fs::path root = testing::sharedData(folder);
        if (!fs::exists(root)) continue;
        for (const auto& e : fs::recursive_directory_iterator(root))
            if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    ASSERT_GT(files.size(), 100u);
    auto w = makeWindow();
    std::map<std::string, int> outcome;
    for (const fs::path& f : files) {
        SCOPED_TRACE(f.string());
        // Alone in a folder of its own, under its own name, as it would be dropped.
        testing::TempDir dir;
        const fs::path copy = dir / f.filename();
        fs::copy_file(f, copy);
        ASSERT_TRUE(openLikeADrop(*w, copy.string(), outcome)) << "no answer within 60 s";
    }
    for (const auto& [what, n] : outcome) std::printf("%s: %d\n", what.c_str(), n);
    EXPECT_GT(outcome["error shown"], 0);
    EXPECT_GT(outcome["opened (or series listed)"], 0);
    // Still working: a good series opens.
    testing::TempDir good;
    const TaskResult r =
        runTask(*w, [&] { w->openPath(QString::fromStdString(writeSeries(good))); });
    EXPECT_TRUE(r.finished && r.ok) << r.message.toStdString();
    EXPECT_TRUE(w->state()->hasImage());
}

TEST(MalformedFiles, FuzzerCrashInputsEndInAnError) {
    const fs::path regressions = fs::path(VOXSEG_SOURCE_DIR) / "tests/fuzz/regressions";
    ASSERT_TRUE(fs::exists(regressions));
    // Named as a user would name them, by what the fuzzer fed them to.
    const std::map<std::string, std::string> names = {{"fuzz_image_mha", "volume.mha"},
                                                      {"fuzz_image_nii_gz", "volume.nii.gz"},
                                                      {"fuzz_image_nii", "volume.nii"},
                                                      {"fuzz_image_nrrd", "volume.nrrd"},
                                                      {"fuzz_dicomdir", "DICOMDIR"}};
    auto w = makeWindow();
    std::map<std::string, int> outcome;
    int inputs = 0;
    testing::TempDir image_dir;
    const std::string image = writeSeries(image_dir);
    for (const auto& target : fs::directory_iterator(regressions)) {
        const std::string t = target.path().filename().string();
        for (const auto& input : fs::directory_iterator(target.path())) {
            SCOPED_TRACE(input.path().string());
            ++inputs;
            testing::TempDir dir;
            if (t == "fuzz_seg_reader" || t == "fuzz_rtstruct_reader") {
                // A damaged segmentation loaded over the image it claims to belong to.
                const TaskResult opened =
                    runTask(*w, [&] { w->openPath(QString::fromStdString(image)); });
                ASSERT_TRUE(opened.ok) << opened.message.toStdString();
                const fs::path seg = dir / "segmentation.dcm";
                fs::copy_file(input.path(), seg);
                const TaskResult r = runTask(
                    *w, [&] { w->loadSegmentation(QString::fromStdString(seg.string())); }, 60000);
                ASSERT_TRUE(r.finished);
                ++outcome[r.ok ? "opened (or series listed)" : "error shown"];
                if (!r.ok) EXPECT_FALSE(w->lastError().isEmpty());
                continue;
            }
            auto it = names.find(t);
            const fs::path copy = dir / (it != names.end() ? it->second : "image.dcm");
            fs::copy_file(input.path(), copy);
            ASSERT_TRUE(openLikeADrop(*w, copy.string(), outcome));
        }
    }
    for (const auto& [what, n] : outcome) std::printf("%s: %d\n", what.c_str(), n);
    EXPECT_GT(inputs, 0);
}

}  // namespace
}  // namespace voxseg::ui
