#include "gpucap/core/text.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

TEST(Text, ParseDoubleAcceptsWholeNumbersOnly) {
  EXPECT_EQ(parse_double(" 12.5 "), 12.5);
  EXPECT_EQ(parse_double("+3"), 3.0);
  EXPECT_EQ(parse_double("-0.25"), -0.25);
  EXPECT_EQ(parse_double("1e3"), 1000.0);
  EXPECT_FALSE(parse_double(""));
  EXPECT_FALSE(parse_double("12x"));
  EXPECT_FALSE(parse_double("nan"));
  EXPECT_FALSE(parse_double("inf"));
  EXPECT_FALSE(parse_double("1,5"));
}

TEST(Text, ParseIntegerRejectsFractions) {
  EXPECT_EQ(parse_integer("255"), 255);
  EXPECT_EQ(parse_integer(" 7\r"), 7);
  EXPECT_FALSE(parse_integer("2.5"));
  EXPECT_FALSE(parse_integer("ten"));
  EXPECT_FALSE(parse_integer("99999999999999999999999"));
}

TEST(Text, NameKeyIgnoresCaseAndPunctuation) {
  EXPECT_EQ(name_key("MobilenetV1_05"), "mobilenetv105");
  EXPECT_EQ(name_key("mobilenet_v1_0.5"), "mobilenetv105");
  EXPECT_EQ(name_key("Tesla-P40"), "teslap40");
}

TEST(Text, EscapeControlWritesControlCharactersAsHex) {
  EXPECT_EQ(escape_control("plain /path?a=1"), "plain /path?a=1");
  EXPECT_EQ(escape_control("a\nb\rc\x1b[2J\x7f"), "a\\x0ab\\x0dc\\x1b[2J\\x7f");
  EXPECT_EQ(escape_control(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(escape_control("caf\xc3\xa9 \xc2\xa0"), "caf\xc3\xa9 \xc2\xa0");  // UTF-8 passes as it is
  EXPECT_EQ(escape_control("csi\xc2\x9b" "2J"), "csi\\xc2\\x9b2J");              // but not a C1 control
}

TEST(Text, SplitKeepsEmptyFields) {
  const auto parts = split("a,,b,", ',');
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(parts[3], "");
}

TEST(Files, WriteIsAtomicAndReadBack) {
  test::TempDir dir;
  const auto path = dir.file("out.txt");
  write_text_file(path, "hello\n");
  EXPECT_EQ(read_text_file(path), "hello\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Files, ListsBySuffixInOrder) {
  test::TempDir dir;
  dir.write("b.json", "{}");
  dir.write("a.json", "{}");
  dir.write("c.csv", "");
  const auto files = list_files(dir.path(), ".json");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], dir.file("a.json"));
  EXPECT_EQ(files[1], dir.file("b.json"));
  EXPECT_THROW((void)list_files(dir.file("missing"), ".json"), Error);
}

TEST(Files, UnreadableAndUnwritableFilesAreIoErrors) {
  try {
    (void)read_text_file("/nonexistent/file.csv");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/file.csv"), std::string::npos);
  }
  EXPECT_THROW(write_text_file("/nonexistent/dir/out.txt", "x"), Error);
}

}  // namespace
}  // namespace gpucap
