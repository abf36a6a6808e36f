// Manifests: CSV, JSON lines, and case folders; every bad line is an error naming the line.
#include "batch/manifest.h"

#include "tests/batch/batch_test_util.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace voxseg::batch {
namespace {
namespace fs = std::filesystem;

TEST(Manifest, CsvWithAnyColumnOrderQuotesAndRelativeInputs) {
    const std::string text =
        "series,input,case_id,site\n"
        "\"1.2.3\",a/ct.nii.gz,case-01,x\n"
        ",/abs/study,\"case_02\",\"y, z\"\n"
        "\n# a comment\n";
    auto cases = parseCsvManifest(text, "/data/m", "m.csv");
    ASSERT_TRUE(cases.isOk()) << cases.status().toString();
    ASSERT_EQ(cases->size(), 2u);
    EXPECT_EQ((*cases)[0].id, "case-01");
    EXPECT_EQ((*cases)[0].input, "/data/m/a/ct.nii.gz");
    EXPECT_EQ((*cases)[0].series, "1.2.3");
    EXPECT_EQ((*cases)[1].id, "case_02");
    EXPECT_EQ((*cases)[1].input, "/abs/study");
    EXPECT_EQ((*cases)[1].series, "");
}

TEST(Manifest, CsvErrorsNameTheLine) {
    auto no_header = parseCsvManifest("a,b\n1,2\n", "", "m.csv");
    ASSERT_FALSE(no_header.isOk());
    EXPECT_NE(no_header.status().toString().find("case_id,input"), std::string::npos);

    auto dup = parseCsvManifest("case_id,input\nx,a\ny,b\nx,c\n", "", "m.csv");
    ASSERT_FALSE(dup.isOk());
    EXPECT_NE(dup.status().toString().find("m.csv:4"), std::string::npos)
        << dup.status().toString();

    auto bad_id = parseCsvManifest("case_id,input\n../etc,a\n", "", "m.csv");
    ASSERT_FALSE(bad_id.isOk());
    EXPECT_NE(bad_id.status().toString().find("m.csv:2"), std::string::npos);

    auto fields = parseCsvManifest("case_id,input\nx,a,extra\n", "", "m.csv");
    EXPECT_FALSE(fields.isOk());
    auto quote = parseCsvManifest("case_id,input\n\"x,a\n", "", "m.csv");
    EXPECT_FALSE(quote.isOk());
}

TEST(Manifest, CaseIdRules) {
    EXPECT_EQ(caseIdProblem("abc-1_2.3"), "");
    EXPECT_NE(caseIdProblem(""), "");
    EXPECT_NE(caseIdProblem(".hidden"), "");
    EXPECT_NE(caseIdProblem("a/b"), "");
    EXPECT_NE(caseIdProblem("a b"), "");
    EXPECT_NE(caseIdProblem(std::string(201, 'a')), "");
}

TEST(Manifest, JsonLines) {
    const std::string text =
        "{\"case_id\": \"a\", \"input\": \"x.nii\"}\n"
        "\n"
        "{\"case_id\": \"b\", \"input\": \"/y\", \"series\": 2}\n";
    auto cases = parseJsonLinesManifest(text, "/base", "m.jsonl");
    ASSERT_TRUE(cases.isOk()) << cases.status().toString();
    ASSERT_EQ(cases->size(), 2u);
    EXPECT_EQ((*cases)[0].input, "/base/x.nii");
    EXPECT_EQ((*cases)[1].series, "2");
    auto bad = parseJsonLinesManifest("{\"case_id\": \"a\"}\n", "", "m.jsonl");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().toString().find("m.jsonl:1"), std::string::npos);
    EXPECT_FALSE(parseJsonLinesManifest("not json\n", "", "m.jsonl").isOk());
}

TEST(Manifest, ReadManifestSniffsTheFormat) {
    voxseg::testing::TempDir dir;
    {
        std::ofstream(dir / "cases.txt") << "{\"case_id\": \"a\", \"input\": \"in/a.nii\"}\n";
        std::ofstream(dir / "cases.csv") << "case_id,input\nb,in/b.nii\n";
    }
    auto j = readManifest(dir / "cases.txt");
    ASSERT_TRUE(j.isOk()) << j.status().toString();
    EXPECT_EQ((*j)[0].input, (dir.path() / "in/a.nii").string());
    auto c = readManifest(dir / "cases.csv");
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ((*c)[0].id, "b");
    EXPECT_EQ(readManifest(dir / "missing.csv").status().code(), StatusCode::kNotFound);
}

TEST(Manifest, CaseFoldersImageOrDicom) {
    voxseg::testing::TempDir dir;
    const fs::path root = dir.path() / "root";
    fs::create_directories(root / "b_dicom/sub");
    fs::create_directories(root / "a_image");
    fs::create_directories(root / ".hidden");
    fs::create_directories(root / "out");
    std::ofstream(root / "b_dicom/sub/IM1") << "x";
    ASSERT_TRUE(io::writeImage(batch::testing::makeVolume(1, {8, 8, 4}),
                               (root / "a_image/ct.nii.gz").string())
                    .isOk());
    std::ofstream(root / "a_image/notes.txt") << "not an image";
    std::ofstream(root / "stray.nii") << "ignored: not in a case folder";
    auto cases = listCaseFolders(root.string(), (root / "out").string());
    ASSERT_TRUE(cases.isOk()) << cases.status().toString();
    ASSERT_EQ(cases->size(), 2u);
    EXPECT_EQ((*cases)[0].id, "a_image");
    EXPECT_EQ((*cases)[0].input, (root / "a_image/ct.nii.gz").string());
    EXPECT_EQ((*cases)[1].id, "b_dicom");
    EXPECT_EQ((*cases)[1].input, (root / "b_dicom").string());

    ASSERT_TRUE(io::writeImage(batch::testing::makeVolume(1, {8, 8, 4}),
                               (root / "a_image/ct2.nrrd").string())
                    .isOk());
    auto two = listCaseFolders(root.string());
    ASSERT_FALSE(two.isOk());
    EXPECT_NE(two.status().toString().find("a_image"), std::string::npos);
}

// Issue 15 part 4: the channels of a multi-channel model per case, as `--channel NAME=VALUE`.
TEST(Manifest, ChannelColumnsAndObjects) {
    voxseg::testing::TempDir dir;
    fs::create_directories(dir.path() / "c1");
    std::ofstream(dir.path() / "c1" / "t2.nii.gz") << "x";
    const std::string base = dir.path().string();
    auto csv = parseCsvManifest(
        "case_id,input,channel:T2,Channel:FLAIR\n"
        "c1,c1/t1.nii.gz,c1/t2.nii.gz,\n"
        "c2,study2,3,1.2.840.99\n",
        base, "m.csv");
    ASSERT_TRUE(csv.isOk()) << csv.status().toString();
    ASSERT_EQ((*csv)[0].channels.size(), 1u);  // an empty cell names no channel
    EXPECT_EQ((*csv)[0].channels[0].first, "T2");
    EXPECT_EQ((*csv)[0].channels[0].second, (dir.path() / "c1" / "t2.nii.gz").string());
    ASSERT_EQ((*csv)[1].channels.size(), 2u);
    EXPECT_EQ((*csv)[1].channels[0].second, "3");  // no such file: a series index, as given
    EXPECT_EQ((*csv)[1].channels[1].first, "FLAIR");
    EXPECT_EQ((*csv)[1].channels[1].second, "1.2.840.99");
    auto bad = parseCsvManifest("case_id,input,channel:\nc1,a,b\n", base, "m.csv");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().toString().find("names no channel"), std::string::npos);

    auto jsonl = parseJsonLinesManifest(
        "{\"case_id\": \"c1\", \"input\": \"c1/t1.nii.gz\", \"channels\": {\"T2\": "
        "\"c1/t2.nii.gz\"}}\n",
        base, "m.jsonl");
    ASSERT_TRUE(jsonl.isOk()) << jsonl.status().toString();
    ASSERT_EQ((*jsonl)[0].channels.size(), 1u);
    EXPECT_EQ((*jsonl)[0].channels[0].second, (dir.path() / "c1" / "t2.nii.gz").string());
    auto not_object = parseJsonLinesManifest(
        "{\"case_id\": \"c1\", \"input\": \"a\", \"channels\": [\"x\"]}\n", base, "m.jsonl");
    ASSERT_FALSE(not_object.isOk());
    EXPECT_NE(not_object.status().toString().find("m.jsonl:1"), std::string::npos);
}

}  // namespace
}  // namespace voxseg::batch
