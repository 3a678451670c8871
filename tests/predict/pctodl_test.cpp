#include "gpucap/predict/pctodl.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "gpucap/core/csv.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "support/paths.hpp"

namespace gpucap::predict {
namespace {

std::string pctodl_dir() { return test::shared_file("pctodl"); }

double relative_error(double actual, double expected) {
  if (actual == expected) return 0.0;
  return std::abs(actual - expected) / std::max(std::abs(expected), 1e-300);
}

std::vector<double> numbers(std::string_view list) {
  std::vector<double> out;
  for (const auto item : split(list, ';')) out.push_back(*parse_double(item));
  return out;
}

// Every reference vector of the export (the original predictor's outputs on its grid):
// the four outputs must match to 1e-6 relative (they are expected to be bit-identical), the
// float32 intermediates to a few float32 ulp.
void check_vectors(const std::string& file, std::size_t expected_rows) {
  CsvReader reader(test::shared_file("pctodl/test_vectors/" + file));
  CsvRow row;
  ASSERT_TRUE(reader.next(row));
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < row.fields.size(); ++i) column[std::string(row.fields[i])] = i;
  std::map<std::string, PctodlPredictor> predictors;
  std::size_t rows = 0, exact = 0;
  double worst_output = 0.0, worst_intermediate = 0.0;
  while (reader.next(row)) {
    if (row.blank()) continue;
    const auto field = [&](const char* name) { return row.fields.at(column.at(name)); };
    const std::string model(field("model"));
    const std::string set(field("param_suffix"));
    const auto key = model + set;
    if (!predictors.count(key)) predictors.emplace(key, PctodlPredictor::load(pctodl_dir(), model, set));
    const auto& predictor = predictors.at(key);
    const auto p = numbers(field("p_list"));
    std::vector<int> b;
    for (const double v : numbers(field("b_list"))) b.push_back(static_cast<int>(v));
    const double f = *parse_double(field("f_mhz"));
    const auto out = predictor.predict(p, b, f);
    const std::pair<double, const char*> outputs[] = {
        {out.u_sm, "u_sm"}, {out.u_mem, "u_mem"}, {out.throughput, "throughput"}, {out.power_w, "power"},
        {out.tp_prior, "tp_prior"}, {out.tp_ref, "tp_ref"}, {out.p_dyn_ref, "p_dyn_ref"}, {out.p_static_w, "p_static"}};
    bool all_exact = true;
    for (const auto& [value, name] : outputs) {
      const double expected = *parse_double(field(name));
      const double error = relative_error(value, expected);
      worst_output = std::max(worst_output, error);
      all_exact = all_exact && error == 0.0;
      EXPECT_LE(error, 1e-6) << name << " at line " << row.line << ": " << value << " vs " << expected;
    }
    exact += all_exact ? 1 : 0;
    const auto sm_base = numbers(field("u_sm_base_list"));
    const auto mem_base = numbers(field("u_mem_base_list"));
    ASSERT_EQ(sm_base.size(), out.u_sm_base.size());
    for (std::size_t i = 0; i < sm_base.size(); ++i) {
      worst_intermediate = std::max(worst_intermediate, relative_error(out.u_sm_base[i], sm_base[i]));
      EXPECT_NEAR(out.u_sm_base[i], sm_base[i], 4e-6 * std::max(1.0, std::abs(sm_base[i]))) << "line " << row.line;
      EXPECT_NEAR(out.u_mem_base[i], mem_base[i], 4e-6 * std::max(1.0, std::abs(mem_base[i]))) << "line " << row.line;
    }
    EXPECT_NEAR(out.mem_prior, *parse_double(field("mem_prior")), 1e-5 * std::max(1.0, std::abs(out.mem_prior)));
    ++rows;
  }
  EXPECT_EQ(rows, expected_rows);
  ::testing::Test::RecordProperty(file + "_bit_identical_rows", std::to_string(exact));
  ::testing::Test::RecordProperty(file + "_worst_output_rel_error", std::to_string(worst_output));
  std::printf("%s: %zu rows, %zu bit-identical, worst output relative error %.3g, worst float32 intermediate %.3g\n",
              file.c_str(), rows, exact, worst_output, worst_intermediate);
}

TEST(PctodlPredictor, MatchesEveryRtx3080TiReferenceVector) { check_vectors("test_vectors_3080ti.csv", 462); }
TEST(PctodlPredictor, MatchesEveryA100ReferenceVector) { check_vectors("test_vectors_a100.csv", 660); }

TEST(PctodlPredictor, DefaultParameterSets) {
  EXPECT_EQ(default_pctodl_param_set("3080ti", 0), "imagenet_mem5001");
  EXPECT_EQ(default_pctodl_param_set("rtx3080ti", 9501), "imagenet_mem9501");
  EXPECT_EQ(default_pctodl_param_set("A100", 1215), "imagenet_a100_mem1215");
  EXPECT_THROW((void)default_pctodl_param_set("3080ti", 810), Error);
  EXPECT_THROW((void)default_pctodl_param_set("h100", 0), Error);
}

TEST(PctodlPredictor, BadRequestsAreUsageErrors) {
  const auto predictor = PctodlPredictor::load(pctodl_dir(), "resnet50", "imagenet_mem5001");
  EXPECT_DOUBLE_EQ(predictor.memory_clock_mhz(), 5001);
  const std::vector<double> p = {50, 50};
  const std::vector<int> b = {16};
  EXPECT_THROW((void)predictor.predict(p, b, 1500), Error);
  const std::vector<int> zero = {0, 8};
  EXPECT_THROW((void)predictor.predict(p, zero, 1500), Error);
  EXPECT_THROW((void)PctodlPredictor::load(pctodl_dir(), "resnet18", "imagenet_mem5001"), Error);
  try {
    (void)PctodlPredictor::load(pctodl_dir(), "mnasnet", "a100_mem1215");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("available:"), std::string::npos) << e.what();
  }
}

TEST(PctodlPredictor, MalformedFilesAreNamed) {
  test::TempDir dir;
  std::filesystem::copy(pctodl_dir() + "/index.json", dir.file("index.json"));
  std::filesystem::create_directories(dir.file("params/resnet50"));
  std::filesystem::copy(pctodl_dir() + "/params/resnet50/imagenet_mem5001.json",
                        dir.file("params/resnet50/imagenet_mem5001.json"));
  std::filesystem::create_directories(dir.file("gbr/resnet50/imagenet_mem5001"));
  for (const char* name : {"sm_gbr.json", "mem_gbr.json", "throughput_gbr.json"}) {
    std::filesystem::copy(pctodl_dir() + "/gbr/resnet50/imagenet_mem5001/" + name,
                          dir.file(std::string("gbr/resnet50/imagenet_mem5001/") + name));
  }
  dir.write("gbr/resnet50/imagenet_mem5001/power_dyn_gbr.json", "{\"format\": \"pctodl-gbr/1\"}");
  try {
    (void)PctodlPredictor::load(dir.path(), "resnet50", "imagenet_mem5001");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find("power_dyn_gbr.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpucap::predict
