#include "gpucap/core/json_file.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

TEST(JsonFile, SyntaxErrorNamesFileAndLine) {
  test::TempDir dir;
  const auto path = dir.write("bad.json", "{\n  \"a\": 1,\n  \"b\": ]\n}\n");
  try {
    (void)load_json_file(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_EQ(std::string(e.what()).rfind(path + ":3: invalid JSON", 0), 0u) << e.what();
  }
}

TEST(JsonFile, CommentsAreAllowed) {
  test::TempDir dir;
  const auto json = load_json_file(dir.write("c.json", "// source: datasheet\n{\"a\": 1}\n"));
  EXPECT_EQ(json["a"], 1);
}

TEST(JsonFields, TypedAccessValidates) {
  const auto json = nlohmann::json::parse(R"({"n": 2.5, "neg": -1, "s": "x", "arr": [1, 2], "obj": {"k": 0.5}})");
  const JsonFields f(json, "f.json");
  EXPECT_DOUBLE_EQ(f.positive("n"), 2.5);
  EXPECT_EQ(f.string("s"), "x");
  EXPECT_EQ(f.numbers("arr").size(), 2u);
  EXPECT_DOUBLE_EQ(f.object("obj").fraction("k"), 0.5);
  try {
    (void)f.positive("neg");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "f.json: neg: must be > 0, got -1");
  }
  try {
    (void)f.number("missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "f.json: missing key 'missing'");
  }
  try {
    (void)f.object("obj").positive("k2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "f.json: missing key 'obj.k2'");
  }
  EXPECT_THROW((void)f.string("n"), Error);
  EXPECT_THROW((void)f.integer("n"), Error);
}

}  // namespace
}  // namespace gpucap
