// End-to-end tests of the gpucap binary's offline search and calibration: tune's oracle under a
// cap, calibrate's fits and what it checks first, the calibration's real sweeps, and fidelity.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpucap/core/files.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;
using test::quote;
using test::with;

std::string copied_data_dir(const test::TempDir& dir) {
  std::filesystem::copy(test::data_dir(), dir.file("data"), std::filesystem::copy_options::recursive);
  return dir.file("data");
}

TEST(Cli, TuneOracleFindsTheBestConfigurationUnderTheCap) {
  const std::vector<std::string> tune = {"tune", "--algorithm", "oracle", "--model", "inception_v1",
                                         "--power-cap", "131", "--clock-levels", "949,1063,1189"};
  const auto text = gpucap(tune);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("SIMULATED Tesla P40"), std::string::npos);
  EXPECT_NE(text.out.find("768 of 768"), std::string::npos) << text.out;  // 256 batch sizes × 3 clocks
  const auto r = gpucap(with(tune, {"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_TRUE(json["simulated"].get<bool>());
  EXPECT_EQ(json["evaluations"], 768);
  ASSERT_EQ(json["trials"].size(), 768u);
  const auto& best = json["best"];
  EXPECT_LE(best["max_power_w"].get<double>(), 131.0);
  for (const auto& trial : json["trials"]) {
    if (trial["max_power_w"].get<double>() <= 131.0) {
      EXPECT_LE(trial["throughput_img_s"].get<double>(), best["throughput_img_s"].get<double>());
    }
  }
  const auto budgeted = nlohmann::json::parse(gpucap(with(tune, {"--budget", "10", "--json"})).out);
  EXPECT_EQ(budgeted["evaluations"], 10);
}

TEST(Cli, TuneRejectsBadInput) {
  const std::vector<std::string> tune = {"tune", "--model", "inception_v1", "--power-cap", "131"};
  expect_error(with(tune, {"--algorithm", "annealing"}), 2, "unknown tuning algorithm 'annealing'");
  expect_error(with(tune, {"--algorithm", "oracle", "--budget", "0"}), 2, "--budget 0");
  expect_error(with(tune, {"--algorithm", "oracle", "--clock-levels", "1000.5"}), 2, "does not support the SM clock");
  expect_error(with(tune, {"--algorithm", "oracle", "--measure-s", "0"}), 2, "measurement must last");
  expect_error(with(tune, {"--algorithm", "oracle", "--sample-hz", "0"}), 2, "sampling rate 0 Hz");
  expect_error({"tune", "--algorithm", "oracle", "--model", "inception_v1", "--power-cap", "900"}, 2, "900");
  expect_error({"tune", "--algorithm", "oracle", "--model", "resnet18", "--power-cap", "131"}, 2, "resnet18");
}

TEST(Cli, CalibrateFitsAndWritesOnlyWhenAsked) {
  test::TempDir dir;
  const auto data = copied_data_dir(dir);
  const auto v100 = data + "/gpus/v100.json";
  // Move one fitted value away from its fit, so that writing the fit must change the file.
  auto perturbed = nlohmann::json::parse(read_text_file(v100));
  perturbed["busy_overlap_exponent"] = 1.5;
  std::ofstream(v100) << perturbed.dump(2) << "\n";
  const auto before = read_text_file(v100);
  const auto run = [&](const std::string& extra) {
    const auto command = quote(GPUCAP_CLI_PATH) + " --data-dir " + quote(data) + " calibrate --sources published " +
                         extra + " > " + quote(dir.file("out")) + " 2> " + quote(dir.file("err"));
    return std::system(command.c_str());
  };
  ASSERT_EQ(run("--dry-run"), 0) << read_text_file(dir.file("err"));
  EXPECT_NE(read_text_file(dir.file("out")).find("published: "), std::string::npos);
  EXPECT_NE(read_text_file(dir.file("out")).find("dry run: no data file was changed"), std::string::npos);
  EXPECT_EQ(read_text_file(v100), before);
  ASSERT_EQ(run(""), 0) << read_text_file(dir.file("err"));
  const auto after = read_text_file(v100);
  EXPECT_NE(after, before);
  EXPECT_NE(nlohmann::json::parse(after)["busy_overlap_exponent"].get<double>(), 1.5);
  EXPECT_NE(after.find("\"_calibration\""), std::string::npos);
  // The fit starts from the priors, so calibrating again gives the same files.
  ASSERT_EQ(run(""), 0);
  EXPECT_EQ(read_text_file(v100), after);
  expect_error({"calibrate", "--sources", "mlperf"}, 2, "unknown calibration source 'mlperf'");
  expect_error({"calibrate", "--sources", "p40", "--p40-logs", "/nonexistent"}, 4, "/nonexistent");
}

// Every input is read before the first fit: a broken one fails at once, naming itself, with no
// fitting line on stderr before it; and a copied data folder carries the real-GPU sweeps it names.
TEST(Cli, CalibrateChecksEveryInputBeforeFittingAndACopiedDataFolderCalibrates) {
  test::TempDir dir;
  const auto data = copied_data_dir(dir);
  const auto run = [&](const std::string& args) {
    const auto command = quote(GPUCAP_CLI_PATH) + " --data-dir " + quote(data) + " calibrate " + args + " > " +
                         quote(dir.file("out")) + " 2> " + quote(dir.file("err"));
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(run("--sources real --dry-run"), 0) << read_text_file(dir.file("err"));
  const auto progress = read_text_file(dir.file("err"));
  EXPECT_NE(progress.find("gpucap calibrate ["), std::string::npos) << progress;
  EXPECT_NE(progress.find("real: fitting"), std::string::npos) << progress;
  std::filesystem::remove_all(data + "/calibration/real/2026-11-26-NVIDIA_H200-run2");
  EXPECT_EQ(run("--sources p40,real --dry-run"), 3);
  const auto err = read_text_file(dir.file("err"));
  EXPECT_NE(err.find("real/2026-11-26-NVIDIA_H200-run2 is not a folder"), std::string::npos) << err;
  EXPECT_EQ(err.find("fitting"), std::string::npos) << "a fit started before every input was read:\n" << err;
}

// The sweeps calibration reads from the data folder are the measurements of docs/measurements/.
TEST(Cli, TheCalibrationsRealSweepsAreCopiesOfTheMeasurements) {
  const auto setup = nlohmann::json::parse(read_text_file(test::data_dir() + "/calibration/real.json"));
  std::size_t compared = 0;
  for (const auto& folder : setup.at("folders")) {
    const std::filesystem::path copy = std::filesystem::path(test::data_dir()) / "calibration" / folder.at("path").get<std::string>();
    const auto original = std::filesystem::path(test::data_dir()).parent_path() / "docs" / "measurements" / copy.filename();
    for (const auto& entry : std::filesystem::directory_iterator(original)) {
      const auto name = entry.path().filename().string();
      if (!name.starts_with("sweep-")) continue;
      EXPECT_EQ(read_text_file((copy / name).string()), read_text_file(entry.path().string())) << name;
      ++compared;
    }
  }
  EXPECT_GE(compared, 12u);
}

TEST(Cli, CalibrateDerivesTheGpuNoTraceFitsFromTheFittedOnes) {
  test::TempDir dir;
  const auto data = copied_data_dir(dir);
  // A few rows per testbed keep the fit short; the P100's trace is only compared.
  const std::string header = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n";
  (void)dir.write("traces/summary_power_v100.csv",
                  header + "imagenet,resnet50,64,adadelta,250,3560,215\nimagenet,resnet50,64,adadelta,100,6900,97\n");
  (void)dir.write("traces/summary_power_rtx6000.csv",
                  header + "imagenet,resnet50,64,adadelta,260,5400,240\nimagenet,resnet50,64,adadelta,100,9800,99\n");
  (void)dir.write("traces/summary_power_p100.csv",
                  header + "imagenet,resnet50,64,adadelta,250,6480,164\nimagenet,resnet50,64,adadelta,125,7320,113\n");
  const auto calibrate = [&](const std::string& extra) {
    const auto command = quote(GPUCAP_CLI_PATH) + " --data-dir " + quote(data) + " calibrate --sources zeus --zeus-traces " +
                         quote(dir.file("traces")) + extra + " > " + quote(dir.file("out")) + " 2> " + quote(dir.file("err"));
    return std::system(command.c_str());
  };
  ASSERT_EQ(calibrate(""), 0) << read_text_file(dir.file("err"));
  EXPECT_NE(read_text_file(dir.file("out")).find("derived from the fitted values, not fitted:\n  gpu p100 power_model.sm_dynamic_w"),
            std::string::npos)
      << read_text_file(dir.file("out"));
  const auto file = [&](const std::string& id) { return nlohmann::json::parse(read_text_file(data + "/gpus/" + id + ".json")); };
  const auto p100 = file("p100"), v100 = file("v100-pcie"), rtx = file("rtx6000");
  EXPECT_NE(p100["_calibration"].get<std::string>().find("derived by `gpucap calibrate` from the GPUs fitted to the zeus data"),
            std::string::npos);
  EXPECT_EQ(p100["_prior"]["power_model.sm_dynamic_w"], 166.667) << "the hand prior is kept";
  EXPECT_NEAR(p100["power_model"]["sm_dynamic_w"].get<double>(),
              v100["power_model"]["sm_dynamic_w"].get<double>() * (56.0 * 1329.0) / (80.0 * 1380.0), 1e-3);
  EXPECT_NEAR(p100["host"]["training_loop_scale"].get<double>(), std::sqrt(rtx["host"]["training_loop_scale"].get<double>()),
              1e-4);
  // --json lists them apart from the fitted keys.
  ASSERT_EQ(calibrate(" --dry-run --json"), 0) << read_text_file(dir.file("err"));
  const auto fits = nlohmann::json::parse(read_text_file(dir.file("out")));
  ASSERT_EQ(fits.size(), 1u);
  ASSERT_EQ(fits[0]["derived"].size(), 11u);
  EXPECT_EQ(fits[0]["derived"][0]["parameter"], "gpu p100 power_model.sm_dynamic_w");
  EXPECT_EQ(fits[0]["derived"][0]["prior"], 166.667);
  for (const auto& p : fits[0]["parameters"]) EXPECT_EQ(p["parameter"].get<std::string>().find("p100"), std::string::npos);
}

TEST(Cli, FidelityOfAFolderOfLogsEndsWithThePowerLine) {
  test::TempDir dir;
  const auto logs = test::shared_file("batchdvfs-p40/batchdvfs");
  std::filesystem::create_directories(dir.file("logs/nvidia-smi"));
  const std::string stem = "13_ResNetV2_50_BatchDVFS";
  std::filesystem::copy(logs + "/" + stem + ".csv", dir.file("logs/" + stem + ".csv"));
  std::filesystem::copy(logs + "/nvidia-smi/" + stem + ".txt_nvidiasmi_output.csv",
                        dir.file("logs/nvidia-smi/" + stem + ".txt_nvidiasmi_output.csv"));
  const auto r = gpucap({"fidelity", "--p40-logs", dir.file("logs"), "--plots", dir.file("plots"), "--report",
                         dir.file("fidelity.md")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
  EXPECT_EQ(last.rfind("p40 power median_ape=", 0), 0u) << last;
  EXPECT_NE(last.find("% p90_ape="), std::string::npos) << last;
  EXPECT_TRUE(std::filesystem::exists(dir.file("plots/" + stem + ".svg")));
  EXPECT_NE(read_text_file(dir.file("plots/" + stem + ".svg")).find("<svg"), std::string::npos);
  EXPECT_NE(read_text_file(dir.file("fidelity.md")).find("# Fidelity of the GPU twin"), std::string::npos);
  const auto json = nlohmann::json::parse(gpucap({"fidelity", "--p40-logs", dir.file("logs"), "--json"}).out);
  EXPECT_GT(json["p40_power"]["median_ape_pct"].get<double>(), 0.0);
  test::TempDir empty;
  expect_error({"fidelity", "--p40-logs", empty.path()}, 3, "no controller logs");
}

}  // namespace
}  // namespace gpucap
