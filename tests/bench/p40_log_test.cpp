#include "gpucap/bench/p40_log.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

TEST(P40Log, ReadsABatchDvfsLogUpToTheSummaryBlock) {
  const auto log = read_p40_log(test::shared_file("batchdvfs-p40/batchdvfs/01_InceptionV1_BatchDVFS.csv"),
                                P40LogKind::batchdvfs);
  ASSERT_EQ(log.rows.size(), 65u);  // 65 data rows, then a blank line and the summary block
  const auto& first = log.rows.front();
  EXPECT_EQ(first.line, 2u);
  EXPECT_DOUBLE_EQ(first.time_s, 1608672440.19);
  EXPECT_DOUBLE_EQ(first.power_w, 67.04);
  EXPECT_EQ(first.batch_size, 1);
  EXPECT_EQ(first.min_index, 0);
  EXPECT_EQ(first.max_index, 254);
  EXPECT_EQ(first.best_index, 0);
  EXPECT_DOUBLE_EQ(first.cap_w, 131);
  EXPECT_EQ(first.clock_mhz, 1063.0);
  EXPECT_EQ(log.rows.back().batch_size, 148) << "the dataset's last, truncated batch";
}

TEST(P40Log, ReadsClipperAndDvfsLogs) {
  const auto clipper =
      read_p40_log(test::shared_file("batchdvfs-p40/clipper/01_InceptionV1_Clipper.csv"), P40LogKind::clipper);
  EXPECT_EQ(clipper.rows[1].batch_size, 5);
  EXPECT_EQ(clipper.rows[1].best_index, 4);
  EXPECT_FALSE(clipper.rows[1].clock_mhz.has_value());
  const auto dvfs = read_p40_log(test::shared_file("batchdvfs-p40/dvfs256/01_InceptionV1_DVFS.csv"), P40LogKind::dvfs);
  EXPECT_DOUBLE_EQ(dvfs.rows[0].cap_w, 131);
  EXPECT_DOUBLE_EQ(dvfs.rows[0].power_w, 130.64);
  EXPECT_EQ(dvfs.rows[0].batch_size, 256);
}

TEST(P40Log, EverySharedLogParses) {
  const std::pair<const char*, P40LogKind> folders[] = {
      {"batchdvfs", P40LogKind::batchdvfs}, {"clipper", P40LogKind::clipper}, {"dvfs256", P40LogKind::dvfs}};
  int files = 0;
  for (const auto& [folder, kind] : folders) {
    const auto dir = test::shared_file(std::string("batchdvfs-p40/") + folder);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".csv") continue;
      EXPECT_GT(read_p40_log(entry.path().string(), kind).rows.size(), 10u) << entry.path();
      ++files;
    }
  }
  EXPECT_EQ(files, 60);
}

std::string expect_data_error(const std::string& path, P40LogKind kind) {
  try {
    (void)read_p40_log(path, kind);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    return e.what();
  }
  ADD_FAILURE() << "no error for " << path;
  return {};
}

const char* kHeader = "time stamp, Througput (image/sec), power, batch size, minBS, maxBS, BestBS, power cap, DVFS\n";

TEST(P40Log, MalformedLogsNameFileAndLine) {
  test::TempDir dir;
  const auto bad_number = dir.write("a.csv", std::string(kHeader) + "1.0,2.0,67.0,1,0,254,0,131,1063\n"
                                                                    "2.0,2.0,abc,1,0,254,0,131,1063\n");
  EXPECT_EQ(expect_data_error(bad_number, P40LogKind::batchdvfs),
            bad_number + ":3: column 3 (power): 'abc' is not a number");

  const auto short_row = dir.write("b.csv", std::string(kHeader) + "1.0,2.0,67.0,1,0\n");
  EXPECT_NE(expect_data_error(short_row, P40LogKind::batchdvfs).find(":2: expected"), std::string::npos);

  const auto backwards = dir.write("c.csv", std::string(kHeader) + "5.0,2.0,67.0,1,0,254,0,131,1063\n"
                                                                   "4.0,2.0,67.0,1,0,254,0,131,1063\n");
  EXPECT_NE(expect_data_error(backwards, P40LogKind::batchdvfs).find(":3: time stamp goes backwards"),
            std::string::npos);

  const auto zero_batch = dir.write("d.csv", std::string(kHeader) + "5.0,2.0,67.0,0,0,254,0,131,1063\n");
  EXPECT_NE(expect_data_error(zero_batch, P40LogKind::batchdvfs).find(":2: batch size 0"), std::string::npos);

  const auto empty = dir.write("e.csv", "");
  EXPECT_NE(expect_data_error(empty, P40LogKind::batchdvfs).find("empty file"), std::string::npos);

  const auto header_only = dir.write("f.csv", kHeader);
  EXPECT_NE(expect_data_error(header_only, P40LogKind::batchdvfs).find("no data rows"), std::string::npos);
}

TEST(P40Log, WrongKindNamesTheMissingColumn) {
  const auto clipper = test::shared_file("batchdvfs-p40/clipper/01_InceptionV1_Clipper.csv");
  const auto message = expect_data_error(clipper, P40LogKind::batchdvfs);
  EXPECT_NE(message.find(":1: missing column 'minBS' (is this a batchdvfs log?)"), std::string::npos) << message;
}

TEST(P40Log, MissingFileIsAnIoError) {
  try {
    (void)read_p40_log("/nonexistent/log.csv", P40LogKind::clipper);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
  }
}

TEST(P40Log, KindNames) {
  EXPECT_EQ(parse_p40_log_kind("BatchDVFS"), P40LogKind::batchdvfs);
  EXPECT_EQ(parse_p40_log_kind("dvfs256"), P40LogKind::dvfs);
  EXPECT_THROW((void)parse_p40_log_kind("batchsizer"), Error);
}

}  // namespace
}  // namespace gpucap::bench
