// batch::optionsHash, the resume hash that decides whether a finished case may be skipped, is
// derived from the segment option schema (pipeline/segment_options_schema.h): changing any option
// that affects results changes it, the device and the batch size do not, the order the options
// were given in does not, and an option added to the schema is in it as soon as it is set.
#include "batch/runner.h"
#include "pipeline/segment_options_schema.h"
#include "tests/pipeline/schema_values.h"

#include <gtest/gtest.h>

namespace voxseg::batch {
namespace {

using pipeline::SegmentOptionSpec;

using testing::otherValue;

TEST(OptionsHash, EveryResultOptionOfTheSchemaChangesItOthersDoNot) {
    const BatchOptions defaults;
    const std::string base = optionsHash(defaults);
    EXPECT_EQ(base.size(), 64u);
    EXPECT_EQ(optionsHash(defaults), base) << "stable";
    int result_options = 0;
    for (const auto& s : pipeline::segmentOptionSchema()) {
        BatchOptions o;
        const std::string value = otherValue(s, o.segment);
        ASSERT_TRUE(s.apply(value, o.segment).isOk()) << s.flag << " " << value;
        if (s.affects_results) {
            ++result_options;
            EXPECT_NE(optionsHash(o), base) << s.flag << " " << value << " must redo cases";
        } else {
            EXPECT_EQ(optionsHash(o), base) << s.flag << " " << value << " changes no result";
        }
    }
    EXPECT_GE(result_options, 12);  // precision, accumulator, overlap, TTA, post-processing, ...
    // Outside the schema: threads change nothing, the DICOM policies do.
    BatchOptions threads;
    threads.segment.threads = 3;
    EXPECT_EQ(optionsHash(threads), base);
    BatchOptions tilt;
    tilt.dicom.tilt = io::IrregularPolicy::kRefuse;
    EXPECT_NE(optionsHash(tilt), base);
}

TEST(OptionsHash, TheOrderOptionsWereGivenInDoesNotMatter) {
    BatchOptions a, b;
    for (const auto& [flag, text] : std::vector<std::pair<std::string, std::string>>{
             {"--precision", "fp32"}, {"--tta", "true"}, {"--overlap", "0.25"}})
        ASSERT_TRUE(pipeline::applySegmentOption(flag, text, a.segment).isOk());
    for (const auto& [flag, text] : std::vector<std::pair<std::string, std::string>>{
             {"--overlap", "0.25"}, {"--tta", "true"}, {"--precision", "fp32"}})
        ASSERT_TRUE(pipeline::applySegmentOption(flag, text, b.segment).isOk());
    EXPECT_EQ(optionsHash(a), optionsHash(b));
    ASSERT_TRUE(pipeline::applySegmentOption("--overlap", "0.5", b.segment).isOk());
    EXPECT_NE(optionsHash(a), optionsHash(b));
}

// A new option in the schema is in the hash with no edit to batch/: set, it changes the hash (a
// rerun redoes the cases); at its default, it leaves older journals' hashes valid.
TEST(OptionsHash, AnOptionAddedToTheSchemaIsInTheHash) {
    std::vector<SegmentOptionSpec> schema = pipeline::segmentOptionSchema();
    SegmentOptionSpec added;
    added.flag = "--new-option";
    added.key = "new_option";
    added.current = [](const pipeline::SegmentOptions& o) { return std::to_string(o.threads); };
    added.apply = [](const std::string&, pipeline::SegmentOptions&) { return Status::ok(); };
    schema.push_back(added);
    BatchOptions o;
    EXPECT_EQ(optionsHash(o, schema), optionsHash(o)) << "at its default: hash unchanged";
    o.segment.threads = 4;  // stands for the new option's field
    EXPECT_EQ(optionsHash(o), optionsHash(BatchOptions{})) << "not in the real schema";
    EXPECT_NE(optionsHash(o, schema), optionsHash(o)) << "set: in the hash";
}

}  // namespace
}  // namespace voxseg::batch
