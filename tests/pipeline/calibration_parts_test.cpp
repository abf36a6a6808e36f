// The parts of `voxseg model calibrate` (issue 40) that need no network: the running-range
// histogram and the range choosers, the case split, the label-map agreement, the gate, and the
// staged package copy (input untouched, signature policy, nothing left behind on failure).
#include "core/sha256.h"
#include "engine/model/model_package.h"
#include "engine/model/model_signature.h"
#include "pipeline/calibrated_package.h"
#include "pipeline/calibration_cases.h"
#include "pipeline/calibration_gate.h"
#include "pipeline/calibration_ranges.h"
#include "pipeline/label_map_agreement.h"
#include "tests/pipeline/test_model_package.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

namespace voxseg::pipeline {
namespace {
namespace fs = std::filesystem;
using engine::RangeMethod;

std::vector<float> normalValues(size_t n, float mean, float sd, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

TEST(CalibrationHistogram, GrowingTheRangeKeepsEveryCountAndTheQuantiles) {
    // Added in three batches of growing range (two doublings of R), the quantiles equal those of
    // one histogram that saw everything at once, within a bin of the final layout.
    const auto a = normalValues(20000, 0.0f, 1.0f, 1);
    const auto b = normalValues(20000, 0.0f, 3.0f, 2);
    const auto c = normalValues(20000, 0.0f, 9.0f, 3);
    ActivationHistogram grown, once;
    grown.add(a.data(), a.size());
    grown.add(b.data(), b.size());
    grown.add(c.data(), c.size());
    std::vector<float> all(a);
    all.insert(all.end(), b.begin(), b.end());
    all.insert(all.end(), c.begin(), c.end());
    once.add(all.data(), all.size());
    EXPECT_EQ(grown.count(), 60000);
    EXPECT_EQ(grown.min(), once.min());
    EXPECT_EQ(grown.max(), once.max());
    const double bin = grown.halfRange() / ActivationHistogram::kBinsPerSide;
    for (double q : {0.001, 0.1, 0.5, 0.9, 0.999})
        EXPECT_NEAR(grown.quantile(q), once.quantile(q), 2 * bin) << q;
    std::sort(all.begin(), all.end());
    EXPECT_NEAR(grown.quantile(0.999), all[59940], 2 * bin);  // the order statistic
}

TEST(CalibrationHistogram, NonFiniteValuesAreCountedApartAndRefused) {
    ActivationHistogram h;
    const std::vector<float> v{1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity()};
    h.add(v.data(), v.size());
    EXPECT_EQ(h.count(), 2);
    EXPECT_EQ(h.nonFinite(), 2);
    const auto r = chooseActivationRange(h, RangeMethod::kMinMax, 99.99, "enc.1");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("'enc.1' took 2 non-finite"), std::string::npos);
}

TEST(CalibrationRanges, PercentileIgnoresOutliersMinMaxDoesNot) {
    // A ReLU-like tensor: values in [0, 4) plus 5 outliers at 1000 among 200,000.
    std::vector<float> v = normalValues(200000, 2.0f, 0.5f, 4);
    for (float& x : v) x = std::clamp(x, 0.0f, 3.999f);
    for (int i = 0; i < 5; ++i) v[static_cast<size_t>(i) * 1000] = 1000.0f;
    ActivationHistogram h;
    h.add(v.data(), v.size());
    auto minmax = chooseActivationRange(h, RangeMethod::kMinMax, 99.99, "t");
    auto pct = chooseActivationRange(h, RangeMethod::kPercentile, 99.99, "t");
    auto mse = chooseActivationRange(h, RangeMethod::kMse, 99.99, "t");
    ASSERT_TRUE(minmax.isOk() && pct.isOk() && mse.isOk());
    EXPECT_EQ(minmax->hi, 1000.0f);
    EXPECT_LT(pct->hi, 4.5f);  // 99.99 % of 200,000 leaves 20 values above: the 5 outliers go
    EXPECT_GT(pct->hi, 3.0f);
    EXPECT_EQ(pct->lo, 0.0f);
    // MSE keeps outliers this far out (clipping 5 values by ~996 costs more than coarser
    // rounding of all), but never beyond the extremes.
    EXPECT_LE(mse->hi, 1000.0f);
    // Non-negative: zero point 0 in every method; the percentile's scale is ~250x finer.
    auto qm = calibrateActivation(h, RangeMethod::kMinMax, 99.99, "t");
    auto qp = calibrateActivation(h, RangeMethod::kPercentile, 99.99, "t");
    ASSERT_TRUE(qm.isOk() && qp.isOk());
    EXPECT_EQ(qm->zero_point, 0);
    EXPECT_EQ(qp->zero_point, 0);
    EXPECT_GT(qm->scale / qp->scale, 200.0f);
    // MSE's choice has no larger expected error than either other range.
    auto qe = calibrateActivation(h, RangeMethod::kMse, 99.99, "t");
    ASSERT_TRUE(qe.isOk());
    EXPECT_LE(expectedQuantizationError(h, *qe), expectedQuantizationError(h, *qm));
    EXPECT_LE(expectedQuantizationError(h, *qe), expectedQuantizationError(h, *qp) * 1.0001);
}

// 8-bit normalisation inputs: per channel, the magnitude around the centre (the dropped bias)
// over 127 steps; a channel's outliers widen only its own scale; a channel that never left its
// centre gets scale 1.
TEST(CalibrationRanges, ChannelScalesOfEightBitNormInputs) {
    const int64_t inner = 50000;
    std::vector<float> x(3 * inner);
    const std::vector<float> a = normalValues(inner, 5.0f, 1.0f, 11);  // channel 0: around 5
    const std::vector<float> b = normalValues(inner, 0.0f, 3.0f, 12);  // channel 1: wider
    std::copy(a.begin(), a.end(), x.begin());
    std::copy(b.begin(), b.end(), x.begin() + inner);
    x[inner + 7] = 400.0f;                             // one outlier in channel 1
    std::fill(x.begin() + 2 * inner, x.end(), -2.0f);  // channel 2: its centre
    ChannelMagnitudes m;
    m.add(x.data(), {1, 3, inner}, {5.0f, 0.0f, -2.0f});
    auto minmax = calibrateChannelScales(m, RangeMethod::kMinMax, 99.99, "t");
    auto pct = calibrateChannelScales(m, RangeMethod::kPercentile, 99.99, "t");
    auto mse = calibrateChannelScales(m, RangeMethod::kMse, 99.99, "t");
    ASSERT_TRUE(minmax.isOk() && pct.isOk() && mse.isOk());
    ASSERT_EQ(minmax->size(), 3u);
    const float amax0 = *std::max_element(a.begin(), a.end(), [](float p, float q) {
        return std::fabs(p - 5.0f) < std::fabs(q - 5.0f);
    });
    EXPECT_NEAR((*minmax)[0], std::fabs(amax0 - 5.0f) / 127.0f, 1e-6);  // around the centre
    EXPECT_NEAR((*minmax)[1], 400.0f / 127.0f, 1e-4);
    EXPECT_EQ((*minmax)[2], 1.0f);
    EXPECT_LT((*pct)[1], 15.0f / 127.0f);  // the outlier is one value in 50,000
    EXPECT_GT((*pct)[1], 9.0f / 127.0f);
    EXPECT_LT((*mse)[1], (*minmax)[1]);
    EXPECT_NEAR((*pct)[0], (*minmax)[0], 0.3 * (*minmax)[0]);
    std::vector<float> bad = x;
    bad[3] = std::nanf("");
    ChannelMagnitudes mb;
    mb.add(bad.data(), {1, 3, inner}, {});
    EXPECT_FALSE(calibrateChannelScales(mb, RangeMethod::kMinMax, 99.99, "t").isOk());
}

TEST(CalibrationRanges, SignedTensorsGetAZeroPointThatHoldsZero) {
    const auto v = normalValues(100000, -0.5f, 1.0f, 5);
    ActivationHistogram h;
    h.add(v.data(), v.size());
    for (RangeMethod m : {RangeMethod::kMinMax, RangeMethod::kPercentile, RangeMethod::kMse}) {
        auto r = chooseActivationRange(h, m, 99.99, "t");
        auto q = calibrateActivation(h, m, 99.99, "t");
        ASSERT_TRUE(r.isOk() && q.isOk()) << engine::rangeMethodName(m);
        EXPECT_LT(r->lo, 0.0f);
        EXPECT_GT(r->hi, 0.0f);
        EXPECT_GT(q->zero_point, 0);
        EXPECT_LT(q->zero_point, 255);
        EXPECT_EQ(engine::quant::dequantizeActivation(static_cast<uint8_t>(q->zero_point), *q),
                  0.0f);
    }
}

TEST(CalibrationRanges, ConstantTensorsAndACollapsedPercentile) {
    ActivationHistogram zeros;
    const std::vector<float> z(1000, 0.0f);
    zeros.add(z.data(), z.size());
    const auto r = chooseActivationRange(zeros, RangeMethod::kPercentile, 99.99, "dead");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("'dead' took a single value"), std::string::npos);
    // 99.995 % zeros after a ReLU: the 99.99th percentile is 0, so the extremes are used.
    std::vector<float> sparse(200000, 0.0f);
    sparse[7] = 3.0f;
    ActivationHistogram h;
    h.add(sparse.data(), sparse.size());
    auto p = chooseActivationRange(h, RangeMethod::kPercentile, 99.99, "sparse");
    ASSERT_TRUE(p.isOk());
    EXPECT_EQ(p->hi, 3.0f);
}

std::vector<CalibrationCase> casesNamed(int n) {
    std::vector<CalibrationCase> c;
    for (int i = 0; i < n; ++i) c.push_back({"c" + std::to_string(i), "in" + std::to_string(i)});
    return c;
}

TEST(CalibrationCases, HeldBackCasesAreSpreadAndDisjoint) {
    auto split = splitCalibrationCases(casesNamed(12), HeldBackSpec{}, 8);
    ASSERT_TRUE(split.isOk()) << split.status().toString();
    ASSERT_EQ(split->held_back.size(), 3u);  // 25 % of 12
    EXPECT_EQ(split->calibration.size(), 9u);
    EXPECT_EQ(split->held_back[0].id, "c2");
    EXPECT_EQ(split->held_back[1].id, "c6");
    EXPECT_EQ(split->held_back[2].id, "c10");
    std::set<std::string> cal;
    for (const auto& c : split->calibration) cal.insert(c.id);
    for (const auto& c : split->held_back) EXPECT_EQ(cal.count(c.id), 0u) << c.id;
    // Default floor of 2 held back: 10 cases are the fewest the defaults accept.
    EXPECT_TRUE(splitCalibrationCases(casesNamed(10), HeldBackSpec{}, 8).isOk());
    auto few = splitCalibrationCases(casesNamed(9), HeldBackSpec{}, 8);
    ASSERT_FALSE(few.isOk());
    EXPECT_EQ(few.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(few.status().message().find("9 cases given"), std::string::npos);
    EXPECT_NE(few.status().message().find("--min-cases"), std::string::npos);
    auto small = splitCalibrationCases(casesNamed(4), *parseHeldBack("1"), 3);
    ASSERT_TRUE(small.isOk());
    EXPECT_EQ(small->held_back.size(), 1u);
    auto dup = casesNamed(12);
    dup[3].id = "c5";
    EXPECT_FALSE(splitCalibrationCases(dup, HeldBackSpec{}, 8).isOk());
}

TEST(CalibrationCases, HeldBackOption) {
    EXPECT_EQ(parseHeldBack("3")->count, 3);
    EXPECT_DOUBLE_EQ(parseHeldBack("40%")->fraction, 0.4);
    for (const char* bad : {"", "0", "-1", "2x", "100%", "0%", "%", "abc"})
        EXPECT_FALSE(parseHeldBack(bad).isOk()) << bad;
}

Volume labelMap(const std::vector<uint8_t>& v) {
    Geometry g;
    g.size = {static_cast<int64_t>(v.size()), 1, 1};
    Volume out = Volume::allocate<uint8_t>(g);
    std::copy(v.begin(), v.end(), out.data<uint8_t>());
    return out;
}

TEST(CalibrationGate, DicePerLabelAgreementAndTheGate) {
    // Label 1: 4 voxels in fp32, 3 of them and one more in the candidate: Dice 6/8. Label 2:
    // identical. Label 3: in neither map (no Dice). 2 of 10 voxels differ.
    const Volume ref = labelMap({1, 1, 1, 1, 2, 2, 0, 0, 0, 0});
    const Volume cand = labelMap({1, 1, 1, 0, 2, 2, 1, 0, 0, 0});
    auto a = compareLabelMaps(ref, cand, {1, 2, 3});
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    EXPECT_DOUBLE_EQ(*a->labels[0].dice, 0.75);
    EXPECT_DOUBLE_EQ(*a->labels[1].dice, 1.0);
    EXPECT_FALSE(a->labels[2].dice.has_value());
    EXPECT_DOUBLE_EQ(a->voxelAgreement(), 0.8);
    auto same = compareLabelMaps(ref, ref, {1, 2, 3});
    std::vector<HeldBackResult> results{{"h1", *a}, {"h2", *same}};
    const auto s = summarizeHeldBack(results);
    EXPECT_EQ(s.cases, (std::vector<std::string>{"h1", "h2"}));
    EXPECT_DOUBLE_EQ(s.dice_min, 0.75);
    EXPECT_DOUBLE_EQ(s.dice_mean, (0.875 + 1.0) / 2);
    EXPECT_DOUBLE_EQ(s.voxel_agreement, 18.0 / 20.0);
    const Status failed = applyCalibrationGate(s, results, CalibrationGate{});
    EXPECT_EQ(failed.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(failed.message().find("0.7500 (case h1, label 1: 4 voxels in fp32, 4 in int8)"),
              std::string::npos)
        << failed.message();
    EXPECT_TRUE(applyCalibrationGate(s, results, {0.7, 0.85}).isOk());
    const Status agreement = applyCalibrationGate(s, results, {0.7, 0.95});
    EXPECT_NE(agreement.message().find("--min-agreement"), std::string::npos);
    EXPECT_FALSE(checkCalibrationGate({1.01, 0.9}).isOk());
    const std::string table = heldBackTable(results, {"one", "two", "three"}, s, {});
    EXPECT_NE(table.find("h1"), std::string::npos);
    EXPECT_NE(table.find("0.7500"), std::string::npos);
    EXPECT_FALSE(compareLabelMaps(ref, labelMap({1, 2}), {1}).isOk());
}

engine::QuantizationRecord someRecord() {
    engine::QuantizationRecord q;
    q.activations["x"] = {0.5f, 3};
    q.calibration_cases = {"c1"};
    return q;
}

std::map<std::string, std::string> folderDigests(const fs::path& folder) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(folder))
        if (e.is_regular_file())
            out[fs::relative(e.path(), folder).string()] = *sha256File(e.path());
    return out;
}

TEST(CalibratedPackage, StagedCopyCommittedWithTheRecordInputUntouched) {
    testing::TempDir dir;
    const fs::path in = testing::writeTinyModelPackage(dir.path() / "in", "MR");
    auto key = engine::generateKeyPair(dir.path() / "k", "test");
    ASSERT_TRUE(key.isOk());
    ASSERT_TRUE(engine::signModelPackage(in, dir.path() / "k.key").isOk());
    const auto before = folderDigests(in);
    {  // unsigned output: the input's signature is not carried over, and the note says so
        auto draft = CalibratedPackageDraft::create(in, dir.path() / "out");
        ASSERT_TRUE(draft.isOk()) << draft.status().toString();
        EXPECT_TRUE(draft->inputWasSigned());
        ASSERT_TRUE(draft->setQuantization(someRecord()).isOk());
        auto note = draft->commit(std::nullopt);
        ASSERT_TRUE(note.isOk());
        EXPECT_NE(note->find("not signed: the input's signature"), std::string::npos);
    }
    EXPECT_EQ(folderDigests(in), before);
    EXPECT_FALSE(fs::exists(dir.path() / "out" / engine::kSignatureFile));
    auto out = engine::readModelPackage(dir.path() / "out");
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    ASSERT_TRUE(out->quantization.has_value());
    EXPECT_EQ(out->quantization->activations.at("x").zero_point, 3);
    EXPECT_EQ(out->name, "test-net");
    // With a key: signed again, and the signature verifies.
    auto draft = CalibratedPackageDraft::create(in, dir.path() / "signed");
    ASSERT_TRUE(draft.isOk());
    ASSERT_TRUE(draft->setQuantization(someRecord()).isOk());
    ASSERT_TRUE(draft->commit(dir.path() / "k.key").isOk());
    auto check = engine::verifyModelPackage(dir.path() / "signed", {*key});
    ASSERT_TRUE(check.isOk()) << check.status().toString();
    EXPECT_TRUE(check->signed_package);
    // Nothing but the three packages is left in the folder (no staged copies).
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename());
    EXPECT_EQ(names, (std::set<std::string>{"in", "out", "signed", "k.key", "k.pub"}));
}

TEST(CalibratedPackage, RefusesAnExistingOutputOrTheInputAndLeavesNothingUncommitted) {
    testing::TempDir dir;
    const fs::path in = testing::writeTinyModelPackage(dir.path() / "in", "MR");
    auto exists = CalibratedPackageDraft::create(in, in.parent_path() / "in");
    ASSERT_FALSE(exists.isOk());
    EXPECT_NE(exists.status().message().find("exists"), std::string::npos);
    {
        auto draft = CalibratedPackageDraft::create(in, dir.path() / "never");
        ASSERT_TRUE(draft.isOk());
        EXPECT_TRUE(fs::exists(draft->folder() / "model.onnx"));
    }  // dropped without commit: the staged copy goes
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename());
    EXPECT_EQ(names, (std::set<std::string>{"in"}));
}

}  // namespace
}  // namespace voxseg::pipeline
