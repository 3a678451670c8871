// The chain the share twin sizes kernels by, on worked timelines.

#include "gpucap/sched/stream_chain.hpp"

#include <gtest/gtest.h>

namespace gpucap::sched {
namespace {

TEST(StreamChain, GpuPacedKernelsRunBackToBackAfterTheFirstLaunch) {
  // Launches at 1, 2, 3; kernels of 5 each: 1–6, 6–11, 11–16.
  EXPECT_DOUBLE_EQ(stream_chain_s({5.0, 5.0, 5.0}, 1.0, 0), 16.0);
}

TEST(StreamChain, HostPacedKernelsEndOneKernelAfterTheLastLaunch) {
  // Launches at 4, 8, 12; kernels of 1: the last ends at 13.
  EXPECT_DOUBLE_EQ(stream_chain_s({1.0, 1.0, 1.0}, 4.0, 0), 13.0);
}

TEST(StreamChain, ASyncPointHoldsTheNextLaunchUntilTheGpuIsDone) {
  // Sync after two kernels: launches at 1, 2 (kernels 1–6, 6–11); the third waits for 11, not 3.
  EXPECT_DOUBLE_EQ(stream_chain_s({5.0, 5.0, 5.0}, 1.0, 2), 16.0);
  // A sync after every kernel: the host's next launch comes launch_s after the one before, but
  // not before the GPU is done. Launch 1 runs 1–6; launch 2 at max(2, 6) runs 6–6.1; launch 3 at
  // max(7, 6.1) runs 7–7.1; launch 4 at 8 runs 8–8.1.
  EXPECT_NEAR(stream_chain_s({5.0, 0.1, 0.1, 0.1}, 1.0, 1), 8.1, 1e-12);
  // Without syncs the short kernels were launched at 2, 3, 4 and queue behind the long one.
  EXPECT_NEAR(stream_chain_s({5.0, 0.1, 0.1, 0.1}, 1.0, 0), 6.3, 1e-12);
}

TEST(StreamChain, ALaunchWindowHoldsALaunchUntilTheKernelThatManyBeforeItEnds) {
  // Window 1: launch 1 runs 1–6; launch 2 waits for it (6–6.1); launch 3 at max(7, 6.1): 7–7.1.
  EXPECT_NEAR(stream_chain_s({5.0, 0.1, 0.1}, 1.0, 0, 1), 7.1, 1e-12);
  // Window 2: launches at 1 and 2; the third waits for the first (6: runs 6.1–6.2); the fourth at
  // max(7, the second's end 6.1): 7–7.1.
  EXPECT_NEAR(stream_chain_s({5.0, 0.1, 0.1, 0.1}, 1.0, 0, 2), 7.1, 1e-12);
  EXPECT_NEAR(stream_chain_s({5.0, 0.1, 0.1}, 1.0, 0, 0), 6.2, 1e-12);
}

TEST(StreamChain, KernelsAreScaledToTheTargetAndStayInShape) {
  const auto k = kernels_for_chain({1.0, 3.0}, 0.5, 10.0);
  ASSERT_EQ(k.size(), 2U);
  EXPECT_NEAR(stream_chain_s(k, 0.5, 0), 10.0, 1e-9);
  EXPECT_NEAR(k[1], 3.0 * k[0], 1e-9);
  // The launches alone take the target: nothing is left for the GPU.
  EXPECT_EQ(kernels_for_chain({1.0, 1.0}, 5.0, 10.0), (std::vector<double>{0.0, 0.0}));
}

TEST(StreamChain, TheLaunchIntervalIsSolvedForAHostPacedStage) {
  const std::vector<double> kernels = {0.1, 0.1, 0.1, 0.1};
  const double h = launch_for_chain(kernels, 0, 2.0);
  EXPECT_NEAR(stream_chain_s(kernels, h, 0), 2.0, 1e-9);
  EXPECT_NEAR(h, (2.0 - 0.1) / 4.0, 1e-9);  // host-paced: four launches, then the last kernel
  // The kernels alone take longer than the target: no host time left.
  EXPECT_EQ(launch_for_chain(kernels, 0, 0.3), 0.0);
  EXPECT_EQ(launch_for_chain({}, 0, 1.0), 0.0);
}

}  // namespace
}  // namespace gpucap::sched
