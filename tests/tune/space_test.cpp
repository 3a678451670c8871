#include "gpucap/tune/space.hpp"

#include <gtest/gtest.h>

#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/tune/oracle.hpp"

namespace gpucap::tune {
namespace {

SearchSpace small_space() { return SearchSpace{{1, 2, 4}, {544, 1063}, {}}; }

TEST(SearchSpace, NumbersPointsBatchFastestThenClockThenMemory) {
  const auto space = small_space();
  ASSERT_EQ(space.size(), 6u);
  EXPECT_EQ(space.point(0), (ConfigPoint{1, 544, std::nullopt}));
  EXPECT_EQ(space.point(2), (ConfigPoint{4, 544, std::nullopt}));
  EXPECT_EQ(space.point(3), (ConfigPoint{1, 1063, std::nullopt}));
  SearchSpace with_memory{{8}, {1000}, {5001, 9501}};
  ASSERT_EQ(with_memory.size(), 2u);
  EXPECT_EQ(with_memory.point(1).memory_clock_mhz, 9501);
  EXPECT_THROW((void)space.point(6), Error);
  EXPECT_EQ(describe(with_memory.point(0)), "batch=8 sm=1000MHz mem=5001MHz");
}

TEST(SearchSpace, IndexOfIsTheInverseOfPointAndRejectsPointsOutsideTheGrid) {
  const SearchSpace with_memory{{1, 2, 4}, {544, 1063}, {5001, 9501}};
  for (const auto& space : {small_space(), with_memory}) {
    for (std::size_t i = 0; i < space.size(); ++i) EXPECT_EQ(space.index_of(space.point(i)), i);
  }
  EXPECT_FALSE(small_space().index_of({3, 544, std::nullopt})) << "batch 3 is not on the grid";
  EXPECT_FALSE(small_space().index_of({1, 600, std::nullopt})) << "nor is 600 MHz";
  EXPECT_FALSE(small_space().index_of({1, 544, 5001.0})) << "the space has no memory-clock axis";
  EXPECT_FALSE(with_memory.index_of({1, 544, std::nullopt})) << "the space needs a memory clock";
  EXPECT_FALSE(with_memory.index_of({1, 544, 7000.0}));
}

TEST(SearchSpace, RejectsEmptyUnsortedOrOutOfRangeAxes) {
  EXPECT_NO_THROW(small_space().validate());
  const auto rejects = [](const SearchSpace& space, const std::string& fragment) {
    try {
      space.validate();
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::usage);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  rejects(SearchSpace{{}, {544}, {}}, "no batch sizes");
  rejects(SearchSpace{{0, 1}, {544}, {}}, "batch sizes 0");
  rejects(SearchSpace{{2, 1}, {544}, {}}, "increasing");
  rejects(SearchSpace{{1}, {}, {}}, "no SM clocks");
  rejects(SearchSpace{{1}, {544, 544}, {}}, "increasing");
  rejects(SearchSpace{{1}, {544}, {-1}}, "memory clocks -1");
}

TEST(BestFeasible, HighestThroughputUnderTheCapEarliestOnTies) {
  const std::vector<Trial> trials = {
      {{1, 544, {}}, {100, 90, 80, 3}},
      {{2, 544, {}}, {300, 140, 120, 3}},  // over a 130-W cap
      {{4, 544, {}}, {200, 130, 110, 3}},  // exactly at the cap: feasible
      {{8, 544, {}}, {200, 120, 110, 3}},  // a tie, later
  };
  const auto best = best_feasible(trials, 130.0);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->point.batch_size, 4);
  EXPECT_FALSE(best_feasible(trials, 50.0).has_value());
}

TEST(OracleTuner, ProposesEveryPointOnceThenStops) {
  OracleTuner oracle(small_space());
  std::set<std::pair<int, double>> seen;
  while (const auto point = oracle.propose()) {
    EXPECT_TRUE(seen.insert({point->batch_size, point->sm_clock_mhz}).second);
    oracle.tell(*point, TrialResult{});
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_FALSE(oracle.propose().has_value());
  EXPECT_THROW(OracleTuner(SearchSpace{{}, {544}, {}}), Error);
}

}  // namespace
}  // namespace gpucap::tune
