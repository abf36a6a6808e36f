// pipeline/segment_options_schema.h: every option's text applies through the engine's parsers,
// reads back through `current`, bad values are errors naming the flag, and each default is a
// value the option accepts.
#include "pipeline/segment_options_schema.h"

#include <gtest/gtest.h>

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
                                                          {"--precision", "int8"},
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
}

}  // namespace
}  // namespace voxseg::pipeline
