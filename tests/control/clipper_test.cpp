#include "gpucap/control/clipper.hpp"

#include <gtest/gtest.h>

namespace gpucap::control {
namespace {

TEST(Clipper, AdditiveIncreaseMultiplicativeDecrease) {
  const ClipperParams params;
  auto s = clipper_initial(params);
  EXPECT_EQ(s.index, 0);
  s = clipper_step(params, s, 50, 131);
  EXPECT_EQ(s.index, 4);  // batch 5, as in 01_InceptionV1_Clipper.csv
  s = clipper_step(params, ClipperState{20}, 140, 131);
  EXPECT_EQ(s.index, 18);  // floor(0.9 * 20)
  s = clipper_step(params, ClipperState{9}, 140, 131);
  EXPECT_EQ(s.index, 8);  // floor(8.1)
  EXPECT_EQ(clipper_step(params, ClipperState{0}, 140, 131).index, 0);
  EXPECT_EQ(clipper_step(params, ClipperState{30}, 120, 131).index, 30) << "in band: hold";
}

TEST(Clipper, IndexNeverPassesTheLastBatchSize) {
  // Upstream compared idx == 255 and could step 252 → 256, past the list; here it stops at 256.
  const ClipperParams params;
  auto s = ClipperState{252};
  s = clipper_step(params, s, 10, 131);
  EXPECT_EQ(s.index, 255);
  s = clipper_step(params, s, 10, 131);
  EXPECT_EQ(s.index, 255);
  ClipperController controller(params);
  Observation obs;
  obs.cap_w = 131;
  obs.power.max_w = 10;
  int batch = 0;
  for (int i = 0; i < 100; ++i) batch = controller.decide(obs).batch_size();
  EXPECT_EQ(batch, 256);
}

}  // namespace
}  // namespace gpucap::control
