#include "gpucap/core/atomic_file.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicFileWriter, TheTargetChangesOnlyAtCommit) {
  test::TempDir dir;
  const auto path = dir.write("trace.csv", "old\n");
  AtomicFileWriter out(path);
  out.write("new 1\n");
  out.write("new 2\n");
  EXPECT_EQ(read_text_file(path), "old\n") << "not replaced while it is written";
  EXPECT_EQ(read_text_file(out.temporary_path()), "new 1\nnew 2\n") << "streamed, not held in memory";
  EXPECT_EQ(std::filesystem::path(out.temporary_path()).parent_path(), std::filesystem::path(path).parent_path());
  out.commit();
  EXPECT_EQ(read_text_file(path), "new 1\nnew 2\n");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"trace.csv"});
  EXPECT_THROW(out.write("late"), Error);
}

TEST(AtomicFileWriter, AnUnfinishedFileIsRemovedOrKeptAsAsked) {
  test::TempDir dir;
  const auto path = dir.write("trace.csv", "old\n");
  { AtomicFileWriter(path).write("half"); }
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"trace.csv"});
  std::string kept;
  {
    AtomicFileWriter out(path, AtomicFileWriter::Durability::sync, AtomicFileWriter::Unfinished::keep);
    out.write("rows so far\n");
    kept = out.temporary_path();
  }
  EXPECT_EQ(read_text_file(path), "old\n");
  EXPECT_EQ(read_text_file(kept), "rows so far\n") << "an interrupted run keeps what it measured";
  EXPECT_EQ(kept.rfind(path + ".partial-", 0), 0U) << kept;
}

TEST(AtomicFileWriter, AFolderThatCannotBeWrittenIsAClearError) {
  try {
    AtomicFileWriter out("/nonexistent-folder/trace.csv");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    EXPECT_EQ(std::string(e.what()), "/nonexistent-folder/trace.csv: cannot open for writing (No such file or directory)");
  }
}

TEST(WriteTextFiles, AllAreWrittenBeforeAnyIsPutInPlace) {
  test::TempDir dir;
  const auto a = dir.write("summary.csv", "old a");
  const auto b = dir.write("report.md", "old b");
  // The second cannot be written (its folder is missing): the first is not replaced either.
  EXPECT_THROW(write_text_files({{a, "new a"}, {dir.file("missing/report.md"), "new b"}}), Error);
  EXPECT_EQ(read_text_file(a), "old a");
  write_text_files({{a, "new a"}, {b, "new b"}});
  EXPECT_EQ(read_text_file(a), "new a");
  EXPECT_EQ(read_text_file(b), "new b");
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"report.md", "summary.csv"}));
}

}  // namespace
}  // namespace gpucap
