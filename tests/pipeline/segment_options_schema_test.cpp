// pipeline/segment_options_schema.h: every option's text applies through the engine's parsers,
// reads back through `current`, bad values are errors naming the flag, and each default is a
// value the option accepts; the rules between options have one message each, the same from
// apply and from checkSegmentOptions (what Segmenter::create runs); resultOptions lists exactly
// the result-affecting options that differ from their defaults, an added option included.
#include "pipeline/segment_options_schema.h"

#include "tests/pipeline/schema_values.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace voxseg::pipeline {
namespace {

TEST(SegmentOptionSchema, ValuesApplyAndReadBack) {
    SegmentOptions o;
    ASSERT_TRUE(applySegmentOption("--device", "cuda:1", o).isOk());
    EXPECT_EQ(o.device.toString(), "cuda:1");
    ASSERT_TRUE(applySegmentOption("--precision", "bf16", o).isOk());
    EXPECT_EQ(o.precision, engine::Precision::kBFloat16);
    ASSERT_TRUE(applySegmentOption("--overlap", "0.25", o).isOk());
    ASSERT_TRUE(o.overlap);
    EXPECT_DOUBLE_EQ(*o.overlap, 0.25);
    ASSERT_TRUE(applySegmentOption("--overlap", "", o).isOk());
    EXPECT_FALSE(o.overlap) << "empty: the model's overlap";
    ASSERT_TRUE(applySegmentOption("--accumulator", "fp32", o).isOk());
    EXPECT_EQ(o.accumulator, engine::DType::kFloat32);
    ASSERT_TRUE(applySegmentOption("--batch", "4", o).isOk());
    EXPECT_EQ(o.batch, 4);
    ASSERT_TRUE(applySegmentOption("--tta", "true", o).isOk());
    EXPECT_TRUE(o.tta);
    EXPECT_FALSE(applySegmentOption("--no-tta", "true", o).isOk()) << "excludes --tta";
    ASSERT_TRUE(applySegmentOption("--fill-holes", "true", o).isOk());
    ASSERT_TRUE(applySegmentOption("--min-component-ml", "2.5", o).isOk());
    ASSERT_TRUE(o.postprocess_all);
    EXPECT_EQ(o.postprocess_all->fill_holes, HoleFilling::k3D);
    EXPECT_DOUBLE_EQ(o.postprocess_all->min_component_ml, 2.5);
    EXPECT_FALSE(o.postprocess_all->largest_component);
    for (const auto& s : segmentOptionSchema()) {
        SegmentOptions copy = o;
        ASSERT_TRUE(s.apply(s.current(o), copy).isOk()) << s.flag << " " << s.current(o);
        EXPECT_EQ(s.current(copy), s.current(o)) << s.flag;
    }
}

TEST(SegmentOptionSchema, DefaultsAreAcceptedAndBadValuesNameTheFlag) {
    std::set<std::string> flags;
    for (const auto& s : segmentOptionSchema()) {
        EXPECT_TRUE(flags.insert(s.flag).second) << "listed twice: " << s.flag;
        EXPECT_FALSE(s.help.empty()) << s.flag;
        SegmentOptions o;
        EXPECT_TRUE(s.apply(s.default_text, o).isOk()) << s.flag;
        // The default applied to default options changes nothing that `current` shows.
        EXPECT_EQ(s.current(o), s.current(SegmentOptions{})) << s.flag;
        for (const auto& c : s.choices) EXPECT_TRUE(s.apply(c, o).isOk()) << s.flag << " " << c;
    }
    for (const char* f :
         {"--device", "--precision", "--overlap", "--tta", "--no-tta", "--accumulator",
          "--largest-component", "--min-component-ml", "--fill-holes"})
        EXPECT_TRUE(flags.count(f)) << f;
    SegmentOptions o;
    for (const auto& [flag, text] :
         std::vector<std::pair<std::string, std::string>>{{"--device", "tpu"},
                                                          {"--precision", "int4"},
                                                          {"--overlap", "0.99"},
                                                          {"--overlap", "half"},
                                                          {"--batch", "0"},
                                                          {"--tta", "maybe"},
                                                          {"--accumulator", "fp8"}}) {
        const Status s = applySegmentOption(flag, text, o);
        ASSERT_FALSE(s.isOk()) << flag << " " << text;
        EXPECT_NE(s.toString().find(flag == "--accumulator" ? "fp8" : flag), std::string::npos)
            << s.toString();
    }
    EXPECT_FALSE(applySegmentOption("--nope", "1", o).isOk());
    // A failed apply leaves the options as they were.
    SegmentOptions before;
    ASSERT_TRUE(applySegmentOption("--tta", "true", before).isOk());
    SegmentOptions after = before;
    EXPECT_FALSE(applySegmentOption("--no-tta", "true", after).isOk());
    EXPECT_FALSE(after.no_tta);
    EXPECT_FALSE(applySegmentOption("--overlap", "0.99", after).isOk());
    EXPECT_FALSE(after.overlap);
}

TEST(SegmentOptionSchema, KeysAreTheFlagsWithUnderscores) {
    for (const auto& s : segmentOptionSchema()) {
        std::string key = s.flag.substr(2);
        std::replace(key.begin(), key.end(), '-', '_');
        EXPECT_EQ(s.key, key);
        ASSERT_NE(findSegmentOptionByKey(s.key), nullptr) << s.key;
        EXPECT_EQ(findSegmentOptionByKey(s.key)->flag, s.flag);
    }
    EXPECT_EQ(findSegmentOptionByKey("precison"), nullptr);
    for (const char* k : {"outputs", "seg_type", "format", "labels", "ignore_modality"})
        EXPECT_NE(findSegmentOptionByKey(k), nullptr) << k;
    SegmentOptions o;
    ASSERT_TRUE(applySegmentOption("--outputs", "seg,stats", o).isOk());
    ASSERT_TRUE(applySegmentOption("--seg-type", "labelmap", o).isOk());
    ASSERT_TRUE(applySegmentOption("--format", "nrrd", o).isOk());
    ASSERT_TRUE(applySegmentOption("--outputs", "seg,rtstruct", o).isOk());
    EXPECT_TRUE(o.outputs.dicom_seg && o.outputs.rtstruct);
    EXPECT_FALSE(o.outputs.statistics || o.outputs.label_map || o.outputs.preview);
    EXPECT_EQ(o.outputs.seg_type, io::SegType::kLabelMap) << "--outputs keeps --seg-type";
    EXPECT_EQ(o.outputs.label_format, "nrrd") << "--outputs keeps --format";
    EXPECT_EQ(segmentOptionSpec("--outputs").current(o), "seg,rtstruct");
    ASSERT_TRUE(applySegmentOption("--labels", "Liver,Spleen", o).isOk());
    EXPECT_EQ(o.labels, (std::vector<std::string>{"Liver", "Spleen"}));
    EXPECT_FALSE(applySegmentOption("--labels", ",", o).isOk());
    EXPECT_FALSE(applySegmentOption("--format", "png", o).isOk());
    EXPECT_FALSE(applySegmentOption("--seg-type", "bitmap", o).isOk());
}

// One rule, one message: what apply refuses and what checkSegmentOptions (Segmenter::create)
// refuses read the same.
// Issue 39 item 6: the expert options are marked advanced (the viewer folds them away), the
// common ones are not; --ignore-modality is offered by the dialog only on a mismatch.
TEST(SegmentOptionSchema, ExpertOptionsAreMarkedAdvanced) {
    for (const char* f : {"--device", "--precision", "--batch", "--accumulator"})
        EXPECT_TRUE(segmentOptionSpec(f).advanced) << f;
    for (const char* f : {"--overlap", "--tta", "--largest-component", "--strict-input"})
        EXPECT_FALSE(segmentOptionSpec(f).advanced) << f;
    EXPECT_FALSE(segmentOptionSpec("--ignore-modality").in_dialog);
    EXPECT_EQ(segmentOptionSpec("--ignore-modality").group, "Input checks");
}

TEST(SegmentOptionSchema, EachRuleHasOneMessage) {
    SegmentOptions by_apply;
    ASSERT_TRUE(applySegmentOption("--tta", "true", by_apply).isOk());
    const Status applied = applySegmentOption("--no-tta", "true", by_apply);
    SegmentOptions direct;
    direct.tta = direct.no_tta = true;
    const Status checked = checkSegmentOptions(direct);
    ASSERT_FALSE(applied.isOk());
    EXPECT_EQ(applied.message(), checked.message());
    EXPECT_EQ(checked.message(), "--tta and --no-tta exclude each other");

    direct = SegmentOptions{};
    direct.batch = 0;
    SegmentOptions scratch;
    EXPECT_EQ(applySegmentOption("--batch", "0", scratch).message(),
              checkSegmentOptions(direct).message());
    EXPECT_EQ(checkSegmentOptions(direct).message(), "--batch: 0 is not a whole number in [1, 64]");
    EXPECT_FALSE(applySegmentOption("--batch", "2.5", scratch).isOk());
    EXPECT_FALSE(applySegmentOption("--batch", "1e30", scratch).isOk());

    direct = SegmentOptions{};
    direct.overlap = 0.99;
    EXPECT_EQ(applySegmentOption("--overlap", "0.99", scratch).message(),
              checkSegmentOptions(direct).message());

    direct = SegmentOptions{};
    direct.accumulator = engine::DType::kInt64;
    const Status acc = checkSegmentOptions(direct);
    ASSERT_FALSE(acc.isOk());
    EXPECT_EQ(acc.message().rfind("--accumulator: ", 0), 0u) << acc.message();
    EXPECT_TRUE(checkSegmentOptions(SegmentOptions{}).isOk());
    // The message without its flag, as CLI11 and node.json errors print it.
    EXPECT_EQ(segmentOptionMessage(segmentOptionSpec("--batch"), checkSegmentOptions([] {
                                       SegmentOptions b;
                                       b.batch = 99;
                                       return b;
                                   }())),
              "99 is not a whole number in [1, 64]");
}

using testing::otherValue;

TEST(SegmentOptionSchema, ResultOptionsHoldEveryResultOptionThatIsSet) {
    EXPECT_TRUE(resultOptions(SegmentOptions{}).empty()) << "defaults: nothing";
    for (const auto& s : segmentOptionSchema()) {
        SegmentOptions o;
        const std::string value = otherValue(s, o);
        ASSERT_TRUE(s.apply(value, o).isOk()) << s.flag << " " << value;
        const auto listed = resultOptions(o);
        if (s.affects_results) {
            ASSERT_EQ(listed.size(), 1u) << s.flag;
            EXPECT_EQ(listed[0].first, s.key);
            EXPECT_EQ(listed[0].second, s.current(o));
        } else {
            EXPECT_TRUE(listed.empty()) << s.flag << " does not change results";
        }
    }
    EXPECT_FALSE(segmentOptionSpec("--device").affects_results);
    EXPECT_FALSE(segmentOptionSpec("--batch").affects_results);
    EXPECT_TRUE(segmentOptionSpec("--precision").affects_results);
    // In the schema's order.
    SegmentOptions o;
    ASSERT_TRUE(applySegmentOption("--fill-holes", "true", o).isOk());
    ASSERT_TRUE(applySegmentOption("--precision", "fp32", o).isOk());
    const auto listed = resultOptions(o);
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[0].first, "precision");
    EXPECT_EQ(listed[1].first, "fill_holes");
}

// A field added to the schema is in resultOptions as soon as its value is not its default (and
// out of it at the default, so older resume hashes stay valid).
TEST(SegmentOptionSchema, AnAddedOptionIsInResultOptions) {
    std::vector<SegmentOptionSpec> schema = segmentOptionSchema();
    SegmentOptionSpec added;
    added.flag = "--threads-as-an-option";
    added.key = "threads_as_an_option";
    added.current = [](const SegmentOptions& o) { return std::to_string(o.threads); };
    added.apply = [](const std::string&, SegmentOptions&) { return Status::ok(); };
    schema.push_back(added);
    SegmentOptions o;
    EXPECT_EQ(resultOptions(o, schema), resultOptions(o));
    o.threads = 3;
    EXPECT_EQ(resultOptions(o), resultOptions(SegmentOptions{})) << "not in the real schema";
    const auto listed = resultOptions(o, schema);
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0], (std::pair<std::string, std::string>{"threads_as_an_option", "3"}));
}

}  // namespace
}  // namespace voxseg::pipeline
