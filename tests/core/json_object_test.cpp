// core/json_object.h: the strict JSON reader shared by node.json, model.json, edit journal lines
// and label sidecars. Every error names the key by its path and says what was expected and found.
#include "core/json_object.h"

#include <gtest/gtest.h>

namespace voxseg {
namespace {

using nlohmann::json;

JsonObject wrap(const json& j, JsonDocument doc = {}) {
    auto o = JsonObject::wrap(j, "", std::move(doc));
    EXPECT_TRUE(o.isOk()) << o.status().toString();
    return *o;
}

TEST(JsonObject, ReadsTypedValuesAndFallbacks) {
    const json j = json::parse(R"({"s": "x", "n": 0.5, "i": 7, "b": true, "l": ["a", "b"],
                                   "one": "c", "o": {"k": 1}, "a": [{"k": 2}, {"k": 3}],
                                   "null": null})");
    JsonObject o = wrap(j);
    EXPECT_EQ(*o.string("s"), "x");
    EXPECT_EQ(*o.number("n", 0, 1), 0.5);
    EXPECT_EQ(*o.integer("i", 0, 10), 7);
    EXPECT_TRUE(*o.boolean("b"));
    EXPECT_EQ(*o.strings("l"), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(*o.strings("one"), std::vector<std::string>{"c"});
    auto inner = o.object("o");
    ASSERT_TRUE(inner.isOk());
    EXPECT_EQ(*inner->integer("k", 0, 9), 1);
    EXPECT_TRUE(inner->finish().isOk());
    auto list = o.objects("a");
    ASSERT_TRUE(list.isOk());
    ASSERT_EQ(list->size(), 2u);
    EXPECT_EQ(*(*list)[1].integer("k", 0, 9), 3);
    // A null is a missing value: the fallback applies.
    EXPECT_EQ(*o.integer("null", 0, 9, 4), 4);
    EXPECT_EQ(*o.string("absent", std::string("d")), "d");
    EXPECT_TRUE(o.finish().isOk());
}

TEST(JsonObject, ErrorsNameTheKeyPathAndWhatWasFound) {
    const json j = json::parse(R"({"routes": [{"port": "11112", "n": 1e300, "m": {"x": 1}}]})");
    JsonObject root = wrap(j, {.subject = "node.json"});
    auto routes = root.objects("routes");
    ASSERT_TRUE(routes.isOk());
    JsonObject& r = (*routes)[0];
    auto port = r.integer("port", 0, 65535);
    ASSERT_FALSE(port.isOk());
    EXPECT_EQ(port.status().subject(), "node.json");
    EXPECT_EQ(port.status().message(),
              "routes[0].port: expected an integer, got a string \"11112\"");
    auto n = r.number("n", 0, 86400);
    ASSERT_FALSE(n.isOk());
    EXPECT_EQ(n.status().message(), "routes[0].n: 1e+300 is outside 0..86400");
    auto missing = r.string("model");
    ASSERT_FALSE(missing.isOk());
    EXPECT_EQ(missing.status().message(), "routes[0].model: missing (a string is required)");
    auto m = r.object("m");
    ASSERT_TRUE(m.isOk());
    Status unknown = m->finish();
    EXPECT_EQ(unknown.message(), "routes[0].m.x: unknown key");
    EXPECT_TRUE(r.finish().isOk());  // port, n, model and m were all asked for
}

TEST(JsonObject, DocumentStyleQuotesKeysAndAddsHelp) {
    const json j = json::parse(R"({"label": 70000, "_comment": "free", "colour": 1})");
    JsonObject o = wrap(j, {.document = "model.json ",
                            .quote = '\'',
                            .help = "see docs/model-package.md",
                            .comment_keys = true});
    auto label = o.integer("label", 1, 65535);
    ASSERT_FALSE(label.isOk());
    EXPECT_EQ(label.status().message(),
              "model.json key 'label': 70000 is outside 1..65535 (see docs/model-package.md)");
    Status keys = o.onlyKeys({"label"});
    EXPECT_EQ(keys.message(),
              "model.json key 'colour': unknown key; allowed here: label (prefix a key with '_' "
              "for comments) (see docs/model-package.md)");
    EXPECT_EQ(o.finish().message(),
              "model.json key 'colour': unknown key (see docs/model-package.md)");
    JsonObject edit = wrap(j, {.quote = '"'});
    EXPECT_EQ(edit.finish().message(), "key \"_comment\": unknown key");
}

TEST(JsonObject, RootAndArraysMustHoldTheRightTypes) {
    auto root = JsonObject::wrap(json::array(), "", std::string("x.json"));
    ASSERT_FALSE(root.isOk());
    EXPECT_EQ(root.status().message(), "expected a JSON object, got an array []");
    const json j = json::parse(R"({"a": [1], "l": [1], "big": 18446744073709551615})");
    JsonObject o = wrap(j);  // reads `j` in place: it must outlive `o`
    EXPECT_EQ(o.objects("a").status().message(), "a[0]: expected a JSON object, got an integer 1");
    EXPECT_EQ(o.strings("l").status().message(), "l[0]: expected a string, got an integer 1");
    EXPECT_EQ(o.integer("big", 0, 10).status().message(),
              "big: 18446744073709551615 is outside 0..10");
}

}  // namespace
}  // namespace voxseg
