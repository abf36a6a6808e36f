// node.json validation: a complete example parses with every key, and each kind of mistake is
// an error naming the key (unknown keys, wrong types, missing model, unknown destination, bad
// regex, bad AE title).
#include "node/config.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace voxseg::node {
namespace {
namespace fs = std::filesystem;

std::string modelDir() {
    return (fs::path(VOXSEG_SOURCE_DIR) / "sample_data/models/ct-phantom").string();
}

nlohmann::json example() {
    return {
        {"ae_title", "VOXSEG"},
        {"port", 11112},
        {"allowed_callers",
         {{{"ae_title", "ORTHANC"}, {"host", "127.0.0.1"}}, {{"ae_title", "CT01"}}}},
        {"spool_dir", "spool"},
        {"quiet_seconds", 3},
        {"unmatched_retention_hours", 1},
        {"min_free_mb", 100},
        {"max_associations", 4},
        {"http_port", 18080},
        {"trusted_keys", "keys/trusted.pub"},
        {"require_signed_models", true},
        {"send", {{"attempts", 3}, {"initial_delay_seconds", 0.5}}},
        {"destinations",
         {{"pacs",
           {{"type", "dicom"}, {"ae_title", "ORTHANC"}, {"host", "127.0.0.1"}, {"port", 4242}}},
          {"web",
           {{"type", "dicomweb"},
            {"url", "http://127.0.0.1:8042/dicom-web/studies"},
            {"bearer_token_file", "token.txt"}}}}},
        {"routes",
         {{{"name", "ct"},
           {"match",
            {{"modality", {"CT"}},
             {"body_part", {"CHEST", "ABDOMEN"}},
             {"series_description", "^(ax|axial)"},
             {"calling_ae", {"CT01"}},
             {"min_slices", 20},
             {"max_slices", 2000}}},
           {"model", modelDir()},
           {"outputs", {"seg", "rtstruct", "stats"}},
           {"send_to", {"pacs", "web"}}}}},
    };
}

Result<NodeConfig> parse(const nlohmann::json& j) {
    return parseNodeConfig(j.dump(), "node.json", "/etc/voxseg");
}

TEST(NodeConfig, CompleteExampleParses) {
    auto c = parse(example());
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->ae_title, "VOXSEG");
    EXPECT_EQ(c->port, 11112);
    ASSERT_EQ(c->allowed_callers.size(), 2u);
    EXPECT_EQ(c->allowed_callers[0].host, "127.0.0.1");
    EXPECT_EQ(c->allowed_callers[1].host, "");
    EXPECT_EQ(c->spool_dir, "/etc/voxseg/spool");
    EXPECT_EQ(c->audit_log, "/etc/voxseg/spool/audit.jsonl");
    EXPECT_DOUBLE_EQ(c->quiet_seconds, 3.0);
    EXPECT_EQ(c->group_by, GroupBy::kSeries);              // the default
    EXPECT_DOUBLE_EQ(c->interrupted_wait_seconds, 120.0);  // the default
    auto j = example();
    j["interrupted_wait_seconds"] = 30;
    EXPECT_DOUBLE_EQ(parse(j)->interrupted_wait_seconds, 30.0);
    j = example();
    j["group_by"] = "study";
    auto study = parse(j);
    ASSERT_TRUE(study.isOk()) << study.status().toString();
    EXPECT_EQ(study->group_by, GroupBy::kStudy);
    EXPECT_EQ(c->min_free_bytes, 100ull << 20);
    EXPECT_EQ(c->send.attempts, 3);
    EXPECT_EQ(c->trusted_keys, "/etc/voxseg/keys/trusted.pub");
    EXPECT_TRUE(c->require_signed_models);
    ASSERT_EQ(c->routes.size(), 1u);
    const pipeline::SegmentOutputs& outputs = c->routes[0].segment.outputs;
    EXPECT_TRUE(outputs.dicom_seg && outputs.rtstruct && outputs.statistics);
    EXPECT_FALSE(outputs.label_map || outputs.preview || outputs.probabilities);
    EXPECT_EQ(c->routes[0].match.min_slices, 20);
    ASSERT_NE(c->destination("web"), nullptr);
    EXPECT_EQ(c->destination("web")->kind, DestinationKind::kDicomWeb);
    EXPECT_EQ(c->destination("web")->bearer_token_file, "/etc/voxseg/token.txt");
    EXPECT_EQ(c->destination("pacs")->port, 4242);
}

void expectError(const nlohmann::json& j, const std::string& fragment) {
    auto c = parse(j);
    ASSERT_FALSE(c.isOk()) << "accepted: " << j.dump();
    EXPECT_NE(c.status().toString().find(fragment), std::string::npos) << c.status().toString();
    EXPECT_NE(c.status().toString().find("node.json"), std::string::npos);
}

TEST(NodeConfig, UnknownKeysAreErrorsNamingTheKey) {
    auto j = example();
    j["quiet_second"] = 3;
    expectError(j, "quiet_second: unknown key");
    j = example();
    j["routes"][0]["match"]["modalty"] = "CT";
    expectError(j, "routes[0].match.modalty: unknown key");
    j = example();
    j["destinations"]["pacs"]["aetitle"] = "X";
    expectError(j, "destinations.pacs.aetitle: unknown key");
    j = example();
    j["send"]["retries"] = 2;
    expectError(j, "send.retries: unknown key");
}

TEST(NodeConfig, WrongValuesAreErrorsNamingTheKey) {
    auto j = example();
    j["port"] = "11112";
    expectError(j, "port: expected an integer, got a string \"11112\"");
    j = example();
    j["port"] = 70000;
    expectError(j, "port: 70000 is outside");
    j = example();
    j["ae_title"] = "A_TITLE_LONGER_THAN_16";
    expectError(j, "ae_title: an AE title has 1 to 16 characters");
    j = example();
    j.erase("spool_dir");
    expectError(j, "spool_dir: missing");
    j = example();
    j["interrupted_wait_seconds"] = -1;
    expectError(j, "interrupted_wait_seconds: -1 is outside 0..86400");
    // fuzz_node_config (session 12): min_free_mb = 5.4e92 was converted to a uint64_t byte
    // count (UBSan: outside the range of representable values). Every number has a range.
    j = example();
    j["min_free_mb"] = 5.3757e92;
    expectError(j, "min_free_mb: 5.3757e+92 is outside 0..1099511627776");
    j = example();
    j["quiet_seconds"] = 1e300;
    expectError(j, "quiet_seconds: 1e+300 is outside 0..86400");
    j = example();
    j["send"]["initial_delay_seconds"] = -0.5;
    expectError(j, "send.initial_delay_seconds: -0.5 is outside 0..86400");
    j = example();
    j["destinations"]["web"]["timeout_seconds"] = 0;
    expectError(j, "destinations.web.timeout_seconds: 0 is outside 0.001..86400");
    j = example();
    j["routes"][0]["model"] = "/nonexistent/model";
    expectError(j, "routes[0].model: '/nonexistent/model' is not a model package");
    j = example();
    j["routes"][0]["send_to"] = {"nowhere"};
    expectError(j, "routes[0].send_to: 'nowhere' is not one of the destinations");
    // fuzz_node_config (session 12): libstdc++ reads a back reference or a {n} bound into a long
    // unchecked (UBSan: signed overflow) and recurses per term of a pattern.
    j = example();
    j["routes"][0]["match"]["series_description"] = "a{99999999999999999999}";
    expectError(j, "routes[0].match.series_description: holds a number of more than 9 digits");
    j = example();
    j["routes"][0]["match"]["series_description"] = std::string(257, 't');
    expectError(j, "routes[0].match.series_description: a pattern of 257 characters (at most 256)");
    j = example();
    j["routes"][0]["match"]["series_description"] = "(unclosed";
    expectError(j, "routes[0].match.series_description: not a regular expression");
    j = example();
    j["routes"][0]["outputs"] = {"seg", "nifti"};
    expectError(j, "routes[0].outputs: 'nifti' is not one of");
    j = example();
    j["destinations"]["web"]["url"] = "ftp://x";
    expectError(j, "destinations.web.url: must start with http");
    j = example();
    j["destinations"]["pacs"]["type"] = "dimse";
    expectError(j, "destinations.pacs.type: 'dimse' is not dicom or dicomweb");
    j = example();
    j["routes"] = nlohmann::json::array();
    expectError(j, "routes: needs at least one route");
    j = example();
    j.erase("trusted_keys");
    expectError(j, "require_signed_models: needs trusted_keys");
    j = example();
    j["group_by"] = "patient";
    expectError(j, "group_by: 'patient' is not series or study");
    j = example();
    j["group_by"] = 1;
    expectError(j, "group_by: ");
    j = example();
    j["routes"][0]["match"]["min_slices"] = 50;
    j["routes"][0]["match"]["max_slices"] = 10;
    expectError(j, "min_slices: is larger than max_slices");
    auto bad = parseNodeConfig("{\"port\": ", "node.json", "/");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().toString().find("not valid JSON"), std::string::npos);
}

// Issue 36 item 3: a route takes every segment option of pipeline/segment_options_schema.h under
// "options", parsed and checked by the schema; errors name the route's key and say what the
// schema says.
TEST(NodeConfig, RouteOptionsAreTheSegmentOptionSchemas) {
    auto c = parse(example());
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    pipeline::SegmentOptions plain = c->routes[0].segment;
    EXPECT_EQ(plain.precision, engine::Precision::kAuto);
    EXPECT_FALSE(plain.tta);
    EXPECT_EQ(plain.outputs.seg_type, io::SegType::kBinary);

    auto j = example();
    j["routes"][0].erase("outputs");
    j["routes"][0]["options"] = {{"device", "cpu"},
                                 {"precision", "fp32"},
                                 {"overlap", 0.25},
                                 {"tta", true},
                                 {"batch", 4},
                                 {"accumulator", "fp32"},
                                 {"largest_component", true},
                                 {"min_component_ml", 2.5},
                                 {"fill_holes", true},
                                 {"outputs", {"seg", "stats"}},
                                 {"seg_type", "labelmap"},
                                 {"labels", {"Liver", "Spleen"}},
                                 {"ignore_modality", true}};
    c = parse(j);
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    const pipeline::SegmentOptions& o = c->routes[0].segment;
    EXPECT_EQ(o.device.toString(), "cpu");
    EXPECT_EQ(o.precision, engine::Precision::kFloat32);
    ASSERT_TRUE(o.overlap);
    EXPECT_DOUBLE_EQ(*o.overlap, 0.25);
    EXPECT_TRUE(o.tta);
    EXPECT_EQ(o.batch, 4);
    EXPECT_EQ(o.accumulator, engine::DType::kFloat32);
    ASSERT_TRUE(o.postprocess_all);
    EXPECT_TRUE(o.postprocess_all->largest_component);
    EXPECT_DOUBLE_EQ(o.postprocess_all->min_component_ml, 2.5);
    EXPECT_TRUE(o.outputs.dicom_seg && o.outputs.statistics);
    EXPECT_FALSE(o.outputs.rtstruct || o.outputs.label_map || o.outputs.preview);
    EXPECT_EQ(o.outputs.seg_type, io::SegType::kLabelMap);
    EXPECT_EQ(o.labels, (std::vector<std::string>{"Liver", "Spleen"}));
    EXPECT_TRUE(o.ignore_modality);

    // The route-level seg_type goes through the same parser.
    j = example();
    j["routes"][0]["seg_type"] = "labelmap";
    c = parse(j);
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->routes[0].segment.outputs.seg_type, io::SegType::kLabelMap);
    // No outputs anywhere: a SEG.
    j = example();
    j["routes"][0].erase("outputs");
    c = parse(j);
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_TRUE(c->routes[0].segment.outputs.dicom_seg);
    EXPECT_FALSE(c->routes[0].segment.outputs.statistics);
}

TEST(NodeConfig, BadRouteOptionsAreNamedWithTheSchemasMessage) {
    auto with = [](nlohmann::json options) {
        auto j = example();
        j["routes"][0].erase("outputs");
        j["routes"][0]["options"] = std::move(options);
        return j;
    };
    expectError(with({{"precison", "fp32"}}), "routes[0].options.precison: unknown option");
    expectError(with({{"overlap", 0.99}}),
                "routes[0].options.overlap: 0.99 is not a number in [0, 0.95]");
    expectError(with({{"batch", 0}}),
                "routes[0].options.batch: 0 is not a whole number in [1, 64]");
    expectError(with({{"precision", "int4"}}), "routes[0].options.precision: ");
    expectError(with({{"precision", "int4"}}), "int4");
    expectError(with({{"device", "tpu"}}), "routes[0].options.device: 'tpu' is not a device");
    expectError(with({{"accumulator", "fp8"}}),
                "routes[0].options.accumulator: 'fp8' is not fp16 or fp32");
    expectError(with({{"tta", true}, {"no_tta", true}}), "--tta and --no-tta exclude each other");
    expectError(with({{"tta", "yes"}}), "routes[0].options.tta: ");
    expectError(with({{"seg_type", "bitmap"}}), "routes[0].options.seg_type: unknown SEG type");
    expectError(with({{"outputs", {"seg", "preview"}}}),
                "routes[0].options.outputs: 'preview' is not one of seg, rtstruct, stats");
    expectError(with({{"outputs", {"seg", "pdf"}}}), "routes[0].options.outputs: unknown output");
    // Given twice: at the route and under options.
    auto j = with({{"outputs", {"seg"}}});
    j["routes"][0]["outputs"] = {"seg"};
    expectError(j, "routes[0].options.outputs: given twice: here and as routes[0].outputs");
    j = example();
    j["routes"][0]["seg_type"] = "labelmap ";
    expectError(j, "routes[0].seg_type: unknown SEG type 'labelmap '");
    j = example();
    j["routes"][0]["options"] = "fp32";
    expectError(j, "routes[0].options");
}

TEST(NodeConfig, LoadsFromAFileRelativeToItsFolder) {
    testing::TempDir dir;
    auto j = example();
    std::ofstream(dir / "node.json") << j.dump(2);
    auto c = loadNodeConfig(dir / "node.json");
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->spool_dir, (dir.path() / "spool").string());
    EXPECT_FALSE(loadNodeConfig(dir / "missing.json").isOk());
}

// docs/node.md's complete example stays valid (its model folders pointed at sample_data).
TEST(NodeConfig, TheDocumentedExampleIsValid) {
    std::ifstream in(fs::path(VOXSEG_SOURCE_DIR) / "docs/node.md");
    ASSERT_TRUE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string doc = ss.str();
    const size_t b = doc.find("```json\n");
    ASSERT_NE(b, std::string::npos);
    const size_t e = doc.find("```", b + 8);
    std::string text = doc.substr(b + 8, e - b - 8);
    const std::string from = "/opt/voxseg/models";
    for (size_t p; (p = text.find(from)) != std::string::npos;)
        text.replace(p, from.size(), std::string(VOXSEG_SOURCE_DIR) + "/sample_data/models");
    auto c = parseNodeConfig(text, "docs/node.md", "/etc/voxseg");
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->routes.size(), 2u);
    EXPECT_EQ(c->destinations.size(), 2u);
}

// Issue 35 item 5: the called AE title is checked unless the operator lets any through.
TEST(NodeConfig, CalledAeTitleIsStrictByDefault) {
    auto c = parse(example());
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_FALSE(c->accept_any_called_ae);
    auto j = example();
    j["accept_any_called_ae"] = true;
    c = parse(j);
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_TRUE(c->accept_any_called_ae);
    j["accept_any_called_ae"] = "yes";
    expectError(j, "accept_any_called_ae: expected true or false, got a string \"yes\"");
}

}  // namespace
}  // namespace voxseg::node
