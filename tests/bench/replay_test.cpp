#include "gpucap/bench/replay.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

// The acceptance test of replay: over all 60 shared P40 logs (20 jobs x BatchDVFS, Clipper,
// DVFS-256), gpucap's controllers reproduce the logged decisions in >= 98 % of steps in every
// file and >= 99 % pooled. docs/algorithms.md explains the remaining mismatches.
TEST(Replay, ReproducesEverySharedP40Log) {
  const std::pair<const char*, P40LogKind> folders[] = {
      {"batchdvfs", P40LogKind::batchdvfs}, {"clipper", P40LogKind::clipper}, {"dvfs256", P40LogKind::dvfs}};
  std::size_t matched = 0, steps = 0;
  int files = 0;
  for (const auto& [folder, kind] : folders) {
    const auto dir = test::shared_file(std::string("batchdvfs-p40/") + folder);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".csv") continue;
      const auto result = replay_p40_log(read_p40_log(entry.path().string(), kind), ReplayOptions{});
      EXPECT_GE(result.match_pct(), 98.0) << entry.path() << ": " << result.matched << "/" << result.steps.size();
      matched += result.matched;
      steps += result.steps.size();
      ++files;
    }
  }
  EXPECT_EQ(files, 60);
  const double pooled = 100.0 * static_cast<double>(matched) / static_cast<double>(steps);
  EXPECT_GE(pooled, 99.0) << matched << "/" << steps;
  RecordProperty("pooled_match_pct", std::to_string(pooled));
}

const char* kHeader = "time stamp, Througput (image/sec), power, batch size, minBS, maxBS, BestBS, power cap, DVFS\n";

TEST(Replay, DecidesOnlyWhenTheWindowHasPassed) {
  test::TempDir dir;
  // Cap 100: band [80, 100]. Row 1 closes the first window (power 50 → grow to index 127).
  // Row 2 is 1 s later: no decision (the log holds). Row 3 is 3.5 s after row 1: a decision
  // on its power 120 > cap (shrink to 63).
  const auto path = dir.write("log.csv", std::string(kHeader) +
                                             "100.0,1,50,1,0,254,0,100,1063\n"
                                             "101.0,1,120,128,0,254,127,100,1063\n"
                                             "103.5,1,120,128,0,254,127,100,1063\n"
                                             "106.0,1,90,64,0,127,63,100,1063\n");
  const auto result = replay_p40_log(read_p40_log(path, P40LogKind::batchdvfs), ReplayOptions{});
  ASSERT_EQ(result.steps.size(), 3u);
  EXPECT_TRUE(result.steps[0].decided);
  EXPECT_FALSE(result.steps[1].decided);
  EXPECT_TRUE(result.steps[2].decided);
  EXPECT_EQ(result.matched, 3u);
  EXPECT_EQ(result.steps[2].batch, 64);
  EXPECT_EQ(result.steps[2].line, 5u);
}

TEST(Replay, MismatchIsCountedAndResynchronised) {
  test::TempDir dir;
  // The log grows the batch although the logged power is in band (a late sample the log does
  // not show): one mismatch, then replay continues from the logged state and matches again.
  const auto path = dir.write("log.csv", std::string(kHeader) +
                                             "100.0,1,90,1,0,254,0,100,1063\n"
                                             "104.0,1,50,128,0,254,127,100,1063\n"
                                             "108.0,1,50,192,127,254,191,100,1063\n");
  const auto result = replay_p40_log(read_p40_log(path, P40LogKind::batchdvfs), ReplayOptions{});
  ASSERT_EQ(result.steps.size(), 2u);
  EXPECT_FALSE(result.steps[0].match);
  EXPECT_EQ(result.steps[0].batch, 1);
  EXPECT_EQ(result.steps[0].logged_batch, 128);
  EXPECT_TRUE(result.steps[1].match);
  EXPECT_DOUBLE_EQ(result.match_pct(), 50.0);
  const auto csv = replay_csv(result);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "step,time_s,power_w,cap_w,logged_batch,batch,logged_clock_mhz,clock_mhz,match");
  EXPECT_NE(csv.find("\nmatch 50.00% (1/2)\n"), std::string::npos) << csv;
  const auto json = replay_json(result);
  EXPECT_EQ(json["matched"], 1);
  EXPECT_EQ(json["total"], 2);
  EXPECT_EQ(json["steps"][0]["logged_state"]["BestBS"], 127);
}

TEST(Replay, UnknownClockLevelIsADataError) {
  test::TempDir dir;
  const auto path = dir.write("log.csv", std::string(kHeader) +
                                             "100.0,1,50,1,0,254,0,100,1063\n"
                                             "104.0,1,50,128,0,254,127,100,1000\n");
  try {
    (void)replay_p40_log(read_p40_log(path, P40LogKind::batchdvfs), ReplayOptions{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find(":3: DVFS 1000 MHz is not one of"), std::string::npos) << e.what();
  }
}

TEST(Replay, OptionsChangeTheDecisions) {
  // The replay is sensitive to the controller's parameters: the wrong band or window does not
  // reproduce the log.
  const auto log = read_p40_log(test::shared_file("batchdvfs-p40/batchdvfs/01_InceptionV1_BatchDVFS.csv"),
                                P40LogKind::batchdvfs);
  EXPECT_DOUBLE_EQ(replay_p40_log(log, ReplayOptions{}).match_pct(), 100.0);
  ReplayOptions narrow_band;
  narrow_band.alpha = 0.95;
  EXPECT_LT(replay_p40_log(log, narrow_band).match_pct(), 80.0);
  ReplayOptions short_window;
  short_window.window_s = 1.0;
  EXPECT_LT(replay_p40_log(log, short_window).match_pct(), 90.0);
  ReplayOptions bad;
  bad.alpha = 0.0;
  EXPECT_THROW((void)replay_p40_log(log, bad), Error);
  bad = ReplayOptions{};
  bad.window_s = -3.0;
  EXPECT_THROW((void)replay_p40_log(log, bad), Error);
}

}  // namespace
}  // namespace gpucap::bench
