// The shipped promptable model (sample_data/models/interactive, tools/train_interactive.py; issue
// 38 item 6) in voxseg's own session on held-out phantoms it never saw in training (the seeds and
// grids tools/train_interactive.py holds out, made here as `voxseg phantom` makes them): the
// simulated user of tools/eval_interactive.py (edit/interactive/simulated_clicks.h) clicks the
// liver, AutoZoom on, CPU fp32. The bounds sit below the figures recorded in
// docs/interactive-model.md for these seeds, by a margin for other CPUs' rounding: they guard the
// shipped file and the session around it, not issue 38's target (Dice >= 0.9 in <= 3 clicks),
// which this model does not reach.
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/simulated_clicks.h"
#include "io/ct_phantom.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <vector>

namespace voxseg::edit::interactive {
namespace {
namespace fs = std::filesystem;

constexpr double kMinMeanDice1 = 0.55;  // recorded 2026-12-06: 0.577
// recorded 2026-12-07 with the package's refinement margin (8): 0.785; with 2.6.0's 24: 0.716
constexpr double kMinMeanDice3 = 0.75;

const fs::path kModel = fs::path(VOXSEG_SOURCE_DIR) / "sample_data/models/interactive";

struct HeldOut {
    uint32_t seed;
    int64_t columns;  // square slices over 400 mm
    double slice_mm;  // slices over 320 mm
};

// tools/train_interactive.py pool_grid() for the held-out seeds 9001-9006.
constexpr HeldOut kHeldOut[] = {{9001, 112, 4.07}, {9002, 128, 4.81}, {9003, 144, 4.61},
                                {9004, 96, 4.25},  {9005, 112, 2.93}, {9006, 128, 3.42}};

io::CtPhantom makePhantom(const HeldOut& h) {
    io::CtPhantomSpec spec;
    spec.seed = h.seed;
    const double column_mm = std::round(400.0 / static_cast<double>(h.columns) * 1000.0) / 1000.0;
    spec.size = {h.columns, h.columns, static_cast<int64_t>(320.0 / h.slice_mm)};
    spec.spacing = {column_mm, column_mm, h.slice_mm};
    auto phantom = io::makeCtPhantom(spec);
    EXPECT_TRUE(phantom.isOk()) << phantom.status().toString();
    return phantom.isOk() ? std::move(phantom).value() : io::CtPhantom{};
}

// Dice after each of `clicks` simulated clicks on `label`.
std::vector<double> clickSession(InteractiveModel& model, const io::CtPhantom& ph, int label,
                                 int clicks) {
    InteractiveSession session(model.spec(), model.forward());
    EXPECT_TRUE(session.setImage(ph.hu).isOk());
    const Index3 n = session.shape();
    const Volume& lab = ph.labels;
    std::vector<uint8_t> truth(static_cast<size_t>(n[0] * n[1] * n[2]));
    for (size_t i = 0; i < truth.size(); ++i) truth[i] = lab.data<uint8_t>()[i] == label;
    auto r = simulateClicks(session, truth, clicks);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? r->dice : std::vector<double>{};
}

TEST(ShippedInteractiveModel, SegmentsHeldOutPhantomLivers) {
    InteractiveModelOptions options;
    options.num_threads = 2;
    auto model = InteractiveModel::load(kModel, options);
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    EXPECT_EQ((*model)->package().license, "Apache-2.0");
    double sum1 = 0, sum3 = 0;
    for (const HeldOut& h : kHeldOut) {
        const io::CtPhantom ph = makePhantom(h);
        const std::vector<double> dice =
            clickSession(**model, ph, static_cast<int>(io::PhantomLabel::kLiver), 3);
        std::printf("phantom %u liver: Dice", h.seed);
        for (double d : dice) std::printf(" %.3f", d);
        std::printf("\n");
        ASSERT_EQ(dice.size(), 3u);  // the simulated user always finds an error to correct
        sum1 += dice.front();
        sum3 += dice.back();
    }
    const double n = static_cast<double>(std::size(kHeldOut));
    EXPECT_GE(sum1 / n, kMinMeanDice1);
    EXPECT_GE(sum3 / n, kMinMeanDice3);
}

}  // namespace
}  // namespace voxseg::edit::interactive
