#include "gpucap/calibrate/data_files.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/sim/catalog.hpp"
#include "support/paths.hpp"

namespace gpucap::calibrate {
namespace {

TEST(DataFiles, FittedValuesAndPriorsAreWrittenAndReadBack) {
  test::TempDir dir;
  std::filesystem::copy(test::data_dir(), dir.path(), std::filesystem::copy_options::recursive);
  const auto catalog = sim::Catalog::load(dir.path());
  const auto start = TwinParams::from(catalog);
  const std::vector<FitParameter> parameters = {{FileKind::gpu, "h100", "power_model.constant_w", 1, 100, 0},
                                                {FileKind::model, "pnasnet_5_large", "power_intensity", 0.1, 5, 0}};
  const double original_constant = start.gpus.at("h100").power.constant_w;
  const double original_intensity = start.models.at("pnasnet_5_large").power_intensity;
  auto fitted = start;
  fitted.gpus.at("h100").power.constant_w = 33.123456789;
  fitted.models.at("pnasnet_5_large").power_intensity = 1.5;
  write_fitted_parameters(start, fitted, parameters, "test fit");

  const auto reloaded = sim::Catalog::load(dir.path());
  EXPECT_DOUBLE_EQ(reloaded.gpu("h100").power.constant_w, 33.1235) << "6 significant digits";
  EXPECT_DOUBLE_EQ(reloaded.model("pnasnet_5_large").power_intensity, 1.5);
  EXPECT_DOUBLE_EQ(reloaded.gpu("h100").priors.at("power_model.constant_w"), original_constant);
  EXPECT_DOUBLE_EQ(reloaded.model("pnasnet_5_large").priors.at("power_intensity"), original_intensity);
  EXPECT_EQ(reloaded.gpu("h100").sm_clocks_mhz, catalog.gpu("h100").sm_clocks_mhz) << "other keys untouched";

  // A second calibration keeps the first prior, and priors_from() goes back to it.
  auto again = TwinParams::from(reloaded);
  again.gpus.at("h100").power.constant_w = 40.0;
  write_fitted_parameters(TwinParams::from(reloaded), again, parameters, "second fit");
  const auto third = sim::Catalog::load(dir.path());
  EXPECT_DOUBLE_EQ(third.gpu("h100").priors.at("power_model.constant_w"), original_constant);
  EXPECT_DOUBLE_EQ(TwinParams::priors_from(third).gpus.at("h100").power.constant_w, original_constant);
  EXPECT_NE(read_text_file(third.gpu("h100").source_file).find("\"_calibration\": \"second fit\""), std::string::npos);
}

TEST(DataFiles, AFitThatWouldLeaveAFileInvalidChangesNoFile) {
  test::TempDir dir;
  std::filesystem::copy(test::data_dir(), dir.path(), std::filesystem::copy_options::recursive);
  const auto catalog = sim::Catalog::load(dir.path());
  const auto start = TwinParams::from(catalog);
  const std::vector<FitParameter> first = {{FileKind::model, "pnasnet_5_large", "power_intensity", 0.1, 5, 0}};
  const std::vector<FitParameter> second = {{FileKind::gpu, "h100", "voltage.knee_mhz", 100, 5000, 0}};
  auto fitted = start;
  fitted.models.at("pnasnet_5_large").power_intensity = 1.5;
  // The catalogue takes a knee only below the highest SM clock.
  fitted.gpus.at("h100").voltage.knee_mhz = catalog.gpu("h100").max_sm_clock_mhz();
  const auto model_file = read_text_file(catalog.model("pnasnet_5_large").source_file);
  const auto gpu_file = read_text_file(catalog.gpu("h100").source_file);

  try {
    write_fitted_parameters({{&start, &fitted, &first}, {&start, &fitted, &second}},
                            [](const std::string&) { return "bad fit"; });
    FAIL() << "an invalid knee was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find("h100.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("knee_mhz"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text_file(catalog.model("pnasnet_5_large").source_file), model_file) << "the valid file is unchanged too";
  EXPECT_EQ(read_text_file(catalog.gpu("h100").source_file), gpu_file);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
    EXPECT_NE(entry.path().extension(), ".fitted") << entry.path() << " left behind";
  }
  EXPECT_NO_THROW((void)sim::Catalog::load(dir.path()));
}

TEST(DataFiles, RoundingKeepsSixSignificantDigits) {
  EXPECT_DOUBLE_EQ(round_for_file(0.000557416123), 0.000557416);
  EXPECT_DOUBLE_EQ(round_for_file(127.823456), 127.823);
  EXPECT_DOUBLE_EQ(round_for_file(0.0), 0.0);
}

}  // namespace
}  // namespace gpucap::calibrate
