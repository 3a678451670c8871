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
  EXPECT_NE(expect_data_error(short_row, P40LogKind::batchdvfs).find(":2: missing column"),
            std::string::npos);

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

  // A blank line in the middle of the data is damage, not the end of the log.
  const auto gap = dir.write("g.csv", std::string(kHeader) + "1.0,2.0,67.0,1,0,254,0,131,1063\n\n"
                                                             "2.0,2.0,67.0,1,0,254,0,131,1063\n");
  EXPECT_NE(expect_data_error(gap, P40LogKind::batchdvfs).find(":4: data continues after the blank line at line 3"),
            std::string::npos);
  // The real summary block after the data is fine, CRLF included.
  const auto summary = dir.write("h.csv", std::string(kHeader) + "1.0,2.0,67.0,1,0,254,0,131,1063\r\n"
                                                                 "2.0,2.0,67.0,1,0,254,0,131,1063\r\n\r\n"
                                                                 " ,min, 1.0, 2.0\r\n ,Number of power cap violation, 1\r\n");
  EXPECT_EQ(read_p40_log(summary, P40LogKind::batchdvfs).rows.size(), 2u);
}

TEST(P40Log, WrongKindNamesTheMissingColumn) {
  const auto clipper = test::shared_file("batchdvfs-p40/clipper/01_InceptionV1_Clipper.csv");
  const auto message = expect_data_error(clipper, P40LogKind::batchdvfs);
  EXPECT_NE(message.find(":1: missing column 'minBS' (is this a batchdvfs log?)"), std::string::npos) << message;
}

TEST(P40Log, MissingFilesAndDirectoriesAreIoErrors) {
  test::TempDir dir;
  for (const auto& path : {std::string("/nonexistent/log.csv"), dir.path(), std::string("/dev/zero")}) {
    try {
      (void)read_p40_log(path, P40LogKind::clipper);
      FAIL() << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::io) << path << ": " << e.what();
    }
  }
}

TEST(NvidiaSmiLog, ReadsSamplesWithOrWithoutUnits) {
  const auto samples = read_nvidia_smi_log(
      test::shared_file("batchdvfs-p40/batchdvfs/nvidia-smi/01_InceptionV1_BatchDVFS.txt_nvidiasmi_output.csv"));
  ASSERT_GT(samples.size(), 100u);
  EXPECT_DOUBLE_EQ(samples[0].power_w, 9.81);
  EXPECT_DOUBLE_EQ(samples[0].sm_clock_mhz, 544);
  EXPECT_DOUBLE_EQ(samples[1].power_w, 49.74);
  const auto log = read_p40_log(test::shared_file("batchdvfs-p40/batchdvfs/01_InceptionV1_BatchDVFS.csv"),
                                P40LogKind::batchdvfs);
  EXPECT_DOUBLE_EQ(smi_time_offset_s(samples, log), 5 * 3600.0) << "the lab's local time was UTC-5";
  const auto bare = read_nvidia_smi_log(
      test::shared_file("batchdvfs-p40/clipper/nvidia-smi/01_InceptionV1_Clipper.txt_nvidiasmi_output.csv"));
  EXPECT_DOUBLE_EQ(bare[0].power_w, 10.10);
  EXPECT_DOUBLE_EQ(bare[1].gpu_util_pct, 2.0);
}

TEST(NvidiaSmiLog, MalformedLinesAreNamed) {
  test::TempDir dir;
  const char* header = "timestamp, utilization.gpu [%], utilization.memory [%], power.draw [W], clocks.current.sm [MHz]\n";
  const auto bad_time = dir.write("a.csv", std::string(header) + "yesterday, 0 %, 0 %, 9.81 W, 544 MHz\n");
  EXPECT_NE(expect_data_error(bad_time, P40LogKind::dvfs).size(), 0u);
  try {
    (void)read_nvidia_smi_log(bad_time);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":2: 'yesterday' is not a YYYY/MM/DD HH:MM:SS.sss time"), std::string::npos)
        << e.what();
  }
  const auto bad_power = dir.write("b.csv", std::string(header) + "2020/12/22 16:27:13.789, 0 %, 0 %, -3 W, 544 MHz\n");
  EXPECT_THROW((void)read_nvidia_smi_log(bad_power), Error);
  const auto wrong_header = dir.write("c.csv", "time, util\n");
  EXPECT_THROW((void)read_nvidia_smi_log(wrong_header), Error);
}

TEST(P40Log, KindNames) {
  EXPECT_EQ(parse_p40_log_kind("BatchDVFS"), P40LogKind::batchdvfs);
  EXPECT_EQ(parse_p40_log_kind("dvfs256"), P40LogKind::dvfs);
  EXPECT_THROW((void)parse_p40_log_kind("batchsizer"), Error);
}

}  // namespace
}  // namespace gpucap::bench
