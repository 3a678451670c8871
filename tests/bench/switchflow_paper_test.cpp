// The twin against SwitchFlow's figures: what it reproduces today, held so it does not regress.
// (Every bar and its error are in docs/switchflow/*/report.md.)

#include "gpucap/bench/switchflow_paper.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

PaperReport report(SwitchflowExperiment e) {
  const sim::ShareTwin twin(test::data_dir());
  return run_switchflow_experiment(e, twin, test::data_dir() + "/sched/paper.json");
}

TEST(SwitchflowPaper, Table1StateAndTransferWithinTwentyPercent) {
  const auto r = report(SwitchflowExperiment::table1);
  ASSERT_EQ(r.rows.size(), 16U);
  for (const auto& row : r.rows) EXPECT_TRUE(row.within()) << row.case_name << " " << row.quantity << " " << row.error();
}

TEST(SwitchflowPaper, Fig7OutOfMemoryPairsAndMigratedJobsMatch) {
  const auto r = report(SwitchflowExperiment::fig7);
  int oom_rows = 0;
  for (const auto& row : r.rows) {
    if (row.quantity == "out of memory") {
      ++oom_rows;
      EXPECT_TRUE(row.within()) << row.panel << " " << row.case_name;  // the same pairs fail, and only those
    }
    // A job moved to the 1080 Ti keeps its solo speed, and the high-priority job its own (7(e), 7(f)).
    if (row.panel == "7e" || row.panel == "7f") {
      EXPECT_TRUE(row.within()) << row.panel << " " << row.case_name << " " << row.quantity;
    }
  }
  EXPECT_EQ(oom_rows, 3);
}

TEST(SwitchflowPaper, Fig6SwitchflowBarsWithinTwentyFivePercent) {
  const auto r = report(SwitchflowExperiment::fig6);
  int within = 0;
  for (const auto& row : r.rows) {
    if (row.quantity == "SwitchFlow ms") {
      EXPECT_TRUE(row.within()) << row.panel << " " << row.case_name;
    }
    if (row.role != "other reading") within += row.within() ? 1 : 0;
  }
  EXPECT_GE(within, 38) << to_markdown(r);  // 42 of 63 when this was written (the p95 rows left out)
}

// Issue 39: every number is marked by what it did to the twin, and the report's first count is of
// the independent checks alone.
TEST(SwitchflowPaper, EveryNumberIsMarkedByWhatItDidToTheTwin) {
  const auto fig7 = report(SwitchflowExperiment::fig7);
  int solo_resnet50_v100 = 0;
  for (const auto& row : fig7.rows) {
    if (row.panel == "7c" && row.case_name == "resnet50 alone") {
      // 191 img/s as the background job sets the V100's ResNet50 speed; 172 as a partner is a check.
      EXPECT_EQ(row.role, *row.paper == 191.0 ? "set" : "") << *row.paper;
      ++solo_resnet50_v100;
    }
    const bool corun = row.quantity == "partner img/s" || row.quantity == "background img/s";
    if (!corun) continue;
    if (row.panel == "7c") {
      EXPECT_EQ(row.role, "fit") << row.case_name;  // their mean sets mps.capacity
    } else if (row.panel == "7e" || row.panel == "7f") {
      EXPECT_EQ(row.role, "derived") << row.case_name;
    } else if (row.panel == "7a" || row.panel == "7b") {
      EXPECT_EQ(row.role, "") << row.case_name;
    }
  }
  EXPECT_EQ(solo_resnet50_v100, 2);
  int checks = 0;
  int checks_within = 0;
  for (const auto& row : fig7.rows) {
    if (row.role.empty()) {
      ++checks;
      checks_within += row.within() ? 1 : 0;
    }
  }
  EXPECT_GT(checks, 0);
  EXPECT_NE(to_markdown(fig7).find(fmt::format("**Independent checks: {} of {} within tolerance.**", checks_within, checks)),
            std::string::npos)
      << to_markdown(fig7);
  // Fig. 6's panels (a), (b), (d): the launch-queue depth is fitted to 6(d)'s TF bars, so the TF
  // bars of 6(a) and 6(b) are the checks; the SwitchFlow bars set the BS-1 times (6(b), 6(a)'s
  // ResNet50), are fitted (6(d)) or return the time 6(b) set (6(a)'s others: the inference runs
  // alone); the ratios follow from the bars; the nearest-rank p95 is another reading, not counted.
  const auto fig6 = report(SwitchflowExperiment::fig6);
  int fig6_checks = 0;
  for (const auto& row : fig6.rows) {
    if (row.quantity == "TF / SwitchFlow") {
      EXPECT_EQ(row.role, "derived") << row.panel << " " << row.case_name;
    }
    if (row.quantity == "SwitchFlow ms" && row.panel == "6a" && row.case_name.starts_with("vgg16")) {
      EXPECT_EQ(row.role, "derived");
    }
    if (row.quantity == "TF ms") {
      EXPECT_EQ(row.role, row.panel == "6d" ? "fit" : "") << row.panel << " " << row.case_name;
    }
    if (row.quantity == "TF p95 ms") {
      EXPECT_EQ(row.role, "other reading");
    }
    fig6_checks += row.role.empty() ? 1 : 0;
  }
  EXPECT_EQ(fig6_checks, 14);  // the TF bars of 6(a) and 6(b)
}

TEST(SwitchflowPaper, Fig10ReportsBothDefinitionsOfImprovement) {
  const auto r = report(SwitchflowExperiment::fig10);
  ASSERT_EQ(r.rows.size(), 54U);  // 3 panels × 9 models × 2 definitions
  int within = 0;
  for (const auto& row : r.rows) within += row.within() ? 1 : 0;
  EXPECT_GE(within, 13) << to_markdown(r);  // 15 of 54 when this was written
}

TEST(SwitchflowPaper, Figs8And9CompareInputReuseWithTimeSlicing) {
  const auto fig8 = report(SwitchflowExperiment::fig8);
  const auto fig9 = report(SwitchflowExperiment::fig9);
  ASSERT_EQ(fig8.rows.size(), 72U);  // 4 panels × 9 models × 2 definitions
  ASSERT_EQ(fig9.rows.size(), 60U);  // 3 batch sizes × 10 model sets × 2 definitions
  int within = 0;
  for (const auto* r : {&fig8, &fig9}) {
    for (const auto& row : r->rows) within += row.within() ? 1 : 0;
  }
  EXPECT_GE(within, 38);  // 43 of 132 when this was written
}

// Issue 39: the share twin's h200 against gpucap's own LibTorch run on a real H200 (a BS-1
// MobileNetV2 beside ResNet-18 training): free sharing leaves the median request alone and slows
// its p95 (1.82x solo, measured); switchflow moves the training job to the host CPU, where one
// thread of 16 cores slows nothing, and keeps the request at its solo time (0.99x). The issue
// asks both ratios within 25 %; the second follows from the set request time (derived).
TEST(SwitchflowPaper, TheH200RunIsWithinTwentyFivePercent) {
  const auto r = report(SwitchflowExperiment::h200);
  ASSERT_EQ(r.rows.size(), 9U);
  int checks = 0;
  double threads_img_s = 0.0;
  double switchflow_img_s = 0.0;
  for (const auto& row : r.rows) {
    if (row.role.empty()) {
      EXPECT_TRUE(row.within()) << row.quantity << " " << row.error();
      ++checks;
    }
    if (row.quantity == "threads p95 / solo p95") {
      EXPECT_GT(*row.twin, 1.3);  // it does slow down
    }
    if (row.quantity == "switchflow p95 / solo p95") {
      EXPECT_LT(*row.twin, 1.05);  // nothing slows the request: the job is on the CPU
      EXPECT_TRUE(row.within()) << row.error();
      EXPECT_EQ(row.role, "derived");  // alone, the request takes its set time
    }
    if (row.quantity == "solo p95 ms") {
      EXPECT_EQ(row.role, "derived");  // alone, the twin's requests take the set time
    }
    if (row.quantity == "background img/s" && row.case_name == "threads") threads_img_s = *row.twin;
    if (row.quantity == "background img/s" && row.case_name == "switchflow") switchflow_img_s = *row.twin;
  }
  EXPECT_EQ(checks, 3);  // threads p50, p95 and its ratio to solo
  // Under switchflow the training job did move: its step on the CPU is 4 s against 37 ms.
  EXPECT_LT(switchflow_img_s, 0.6 * threads_img_s);
  const auto md = to_markdown(r);
  EXPECT_NE(md.find("the real run against the share twin"), std::string::npos);
  EXPECT_NE(md.find("| panel | case | quantity | real | twin |"), std::string::npos);
}

TEST(SwitchflowPaper, MatrixNames) {
  EXPECT_EQ(parse_switchflow_matrix("switchflow-fig7"), SwitchflowExperiment::fig7);
  EXPECT_EQ(parse_switchflow_matrix("switchflow-h200"), SwitchflowExperiment::h200);
  EXPECT_FALSE(parse_switchflow_matrix("batchdvfs-p40").has_value());
}

}  // namespace
}  // namespace gpucap::bench
