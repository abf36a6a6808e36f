// The interactive network on a GPU (label gpu; skipped without a CUDA device): the viewer loads
// interactive packages on device auto, so on a GPU workstation this is what a click runs. The
// fabricated nnInteractive package on its phantom: the CPU fp32 session's three simulated clicks
// replayed on CUDA in fp32 and in the precision auto picks there give the CPU's object.
#include "backends/registry.h"
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/simulated_clicks.h"
#include "io/image_io.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

namespace voxseg::edit::interactive {
namespace {

const std::string kDir = std::string(VOXSEG_SOURCE_DIR) + "/tests/edit/data/nninteractive/";

TEST(InteractiveGpu, ClicksOnCudaGiveTheCpuObject) {
    auto gpu = engine::createBackend(engine::DeviceSpec::cuda());
    if (!gpu.isOk()) GTEST_SKIP() << "no CUDA device: " << gpu.status().toString();
    auto image = io::readImage(kDir + "image.nii.gz");
    auto labels = io::readImage(kDir + "s3_step3.nii.gz");
    ASSERT_TRUE(image.isOk() && labels.isOk());
    std::vector<uint8_t> truth(static_cast<size_t>(labels->geometry().voxelCount()));
    visitPixels(*labels, [&](const auto* p) {
        for (size_t i = 0; i < truth.size(); ++i) truth[i] = p[i] != 0;
    });
    auto cpu = InteractiveModel::load(kDir + "model", {});
    ASSERT_TRUE(cpu.isOk()) << cpu.status().toString();
    InteractiveSession reference((*cpu)->spec(), (*cpu)->forward());
    ASSERT_TRUE(reference.setImage(*image).isOk());
    auto clicks = simulateClicks(reference, truth, 3);
    ASSERT_TRUE(clicks.isOk()) << clicks.status().toString();
    for (const auto& [precision, min_dice] :
         {std::pair{engine::Precision::kFloat32, 0.99}, {engine::Precision::kAuto, 0.95}}) {
        InteractiveModelOptions o;
        o.device = engine::DeviceSpec::cuda();
        o.precision = precision;
        auto model = InteractiveModel::load(kDir + "model", o);
        ASSERT_TRUE(model.isOk()) << model.status().toString();
        InteractiveSession session((*model)->spec(), (*model)->forward());
        ASSERT_TRUE(session.setImage(*image).isOk());
        ASSERT_TRUE(replayClicks(session, clicks->clicks).isOk());
        const double dice = diceScore(session.target(), reference.target());
        std::printf("%s: Dice against the CPU fp32 object %.4f\n", (*model)->describe().c_str(),
                    dice);
        EXPECT_GE(dice, min_dice) << (*model)->describe();
    }
}

}  // namespace
}  // namespace voxseg::edit::interactive
