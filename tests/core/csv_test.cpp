#include "gpucap/core/csv.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

TEST(CsvReader, ReadsTrimmedFieldsWithLineNumbers) {
  test::TempDir dir;
  const auto path = dir.write("a.csv", "h1, h2\r\n 1 ,2.5\r\n\r\nx,\n");
  CsvReader reader(path);
  CsvRow row;
  ASSERT_TRUE(reader.next(row));
  EXPECT_EQ(row.line, 1u);
  EXPECT_EQ(row.fields[1], "h2");
  ASSERT_TRUE(reader.next(row));
  EXPECT_EQ(row.line, 2u);
  EXPECT_DOUBLE_EQ(reader.number(row, 0, "a"), 1.0);
  EXPECT_DOUBLE_EQ(reader.number(row, 1, "b"), 2.5);
  ASSERT_TRUE(reader.next(row));
  EXPECT_TRUE(row.blank());
  ASSERT_TRUE(reader.next(row));
  EXPECT_EQ(row.line, 4u);
  EXPECT_EQ(row.fields.size(), 2u);
  EXPECT_FALSE(reader.next(row));
}

TEST(CsvReader, BadFieldsNameFileLineAndColumn) {
  test::TempDir dir;
  const auto path = dir.write("bad.csv", "h\n1,abc\n");
  CsvReader reader(path);
  CsvRow row;
  ASSERT_TRUE(reader.next(row));
  ASSERT_TRUE(reader.next(row));
  try {
    (void)reader.number(row, 1, "power");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_EQ(std::string(e.what()), path + ":2: column 2 (power): 'abc' is not a number");
  }
  EXPECT_THROW((void)reader.number(row, 5, "missing"), Error);
  EXPECT_THROW((void)reader.integer(row, 7, "x"), Error) << "a missing column is an error";
}

TEST(CsvReader, QuotedFieldsAreRejected) {
  test::TempDir dir;
  CsvReader reader(dir.write("q.csv", "\"a\",b\n"));
  CsvRow row;
  EXPECT_THROW(reader.next(row), Error);
}

}  // namespace
}  // namespace gpucap
