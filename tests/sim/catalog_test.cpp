#include "gpucap/sim/catalog.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "support/paths.hpp"

namespace gpucap::sim {
namespace {

TEST(Catalog, LoadsTheProjectData) {
  const auto catalog = Catalog::load(test::data_dir());
  EXPECT_EQ(catalog.gpus().size(), 10u) << "six inference GPUs and Zeus's V100-PCIe, RTX 6000, P100, A40";
  EXPECT_EQ(catalog.models().size(), 28u);
  const auto family = [&](const char* name) {
    return std::count_if(catalog.models().begin(), catalog.models().end(),
                         [name](const ModelSpec& m) { return m.family == name; });
  };
  EXPECT_EQ(family("tf-slim"), 16) << "the 16 TF-slim models of the BatchDVFS matrix";
  EXPECT_EQ(family("torchvision"), 7) << "the 7 torchvision models of PctoDL";
  EXPECT_EQ(family("zeus-training"), 5) << "Zeus's workloads other than ResNet-50";
  EXPECT_EQ(catalog.dataset("imagenet").images, 15000);
  EXPECT_EQ(catalog.dataset("caltech256").images, 20000);
}

TEST(Catalog, FindsByIdOrAliasIgnoringCaseAndPunctuation) {
  const auto catalog = Catalog::load(test::data_dir());
  EXPECT_EQ(catalog.gpu("Tesla-P40").id, "p40");
  EXPECT_EQ(catalog.gpu("3080TI").id, "rtx3080ti");
  EXPECT_EQ(catalog.model("MobilenetV1_05").id, "mobilenet_v1_0.5");
  EXPECT_EQ(catalog.model("NASNet_A_Large_331").id, "nasnet_a_large");
  EXPECT_EQ(catalog.model("mnasnet").id, "mnasnet1_0");
  EXPECT_EQ(catalog.dataset("CalTech_256_20000").id, "caltech256");
}

TEST(Catalog, UnknownNamesListTheKnownOnes) {
  const auto catalog = Catalog::load(test::data_dir());
  try {
    (void)catalog.gpu("k80");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("unknown GPU 'k80'; known: a100"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)catalog.model("resnet18"), Error);
  EXPECT_THROW((void)catalog.dataset("coco"), Error);
}

TEST(Catalog, P40ClocksIncludeTheSeedLevels) {
  const auto catalog = Catalog::load(test::data_dir());
  const auto& p40 = catalog.gpu("p40");
  EXPECT_EQ(p40.sm_clocks_mhz.size(), 79u);
  EXPECT_DOUBLE_EQ(p40.min_sm_clock_mhz(), 544);
  EXPECT_DOUBLE_EQ(p40.max_sm_clock_mhz(), 1531);
  const std::vector<double> seed = {544, 632, 734, 835, 949, 1063, 1189, 1303, 1430, 1531};
  EXPECT_EQ(p40.dvfs_levels_mhz, seed);
  for (const double level : seed) {
    EXPECT_NE(std::find(p40.sm_clocks_mhz.begin(), p40.sm_clocks_mhz.end(), level), p40.sm_clocks_mhz.end());
  }
}

TEST(Catalog, ClockRangesExpandAndDefaultLadderIsSpread) {
  const auto catalog = Catalog::load(test::data_dir());
  const auto& a100 = catalog.gpu("a100");
  EXPECT_EQ(a100.sm_clocks_mhz.size(), 81u);  // 210..1410 step 15
  EXPECT_DOUBLE_EQ(a100.sm_clocks_mhz.front(), 210);
  EXPECT_DOUBLE_EQ(a100.sm_clocks_mhz.back(), 1410);
  EXPECT_EQ(a100.dvfs_levels_mhz.size(), 10u);
  EXPECT_DOUBLE_EQ(a100.dvfs_levels_mhz.front(), 210);
  EXPECT_DOUBLE_EQ(a100.dvfs_levels_mhz.back(), 1410);
  EXPECT_TRUE(std::is_sorted(a100.dvfs_levels_mhz.begin(), a100.dvfs_levels_mhz.end()));
}

// A copy of the data directory with one file replaced.
std::string data_dir_with(const test::TempDir& dir, const std::string& relative, const std::string& content) {
  std::filesystem::copy(test::data_dir(), dir.path(), std::filesystem::copy_options::recursive);
  return dir.write(relative, content), dir.path();
}

TEST(Catalog, MalformedFilesAreNamed) {
  {
    test::TempDir dir;
    const auto root = data_dir_with(dir, "gpus/p40.json", "{\"id\": \"p40\",\n \"name\": }");
    try {
      (void)Catalog::load(root);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_data);
      EXPECT_NE(std::string(e.what()).find("gpus/p40.json:2: invalid JSON"), std::string::npos) << e.what();
    }
  }
  {
    test::TempDir dir;
    auto text = read_text_file(test::data_dir() + "/models/resnet50.json");
    text.replace(text.find("\"gmacs\": 4.09"), 13, "\"gmacs\": -4.0");
    const auto root = data_dir_with(dir, "models/resnet50.json", text);
    try {
      (void)Catalog::load(root);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("models/resnet50.json: gmacs: must be > 0"), std::string::npos) << e.what();
    }
  }
}

// Loads the project's data with one field of gpus/p40.json set to `value` and expects the load to
// fail with `message` in its error.
void expect_p40_field_rejected(const std::string& key, const std::string& value, const std::string& message) {
  test::TempDir dir;
  auto text = read_text_file(test::data_dir() + "/gpus/p40.json");
  const auto field = "\"" + key + "\":";
  const auto at = text.find(field);
  ASSERT_NE(at, std::string::npos) << key;
  text.replace(at, text.find_first_of(",}\n", at) - at, field + " " + value);
  const auto root = data_dir_with(dir, "gpus/p40.json", text);
  try {
    (void)Catalog::load(root);
    FAIL() << key << " = " << value << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpus/p40.json: " + message), std::string::npos) << e.what();
  }
}

TEST(Catalog, ActivitySpreadAboveOneIsRejected) {
  expect_p40_field_rejected("activity_spread", "1.5", "activity_spread: must be in [0, 1]");
}

TEST(Catalog, ANegativeSensorHoldIsRejected) {
  expect_p40_field_rejected("hold_s", "-0.1", "sensor.hold_s: must be >= 0");
}

TEST(Catalog, ANegativeFirstShapeBatchIsRejected) {
  expect_p40_field_rejected("first_autotune_batch", "-2", "first_autotune_batch: must be >= 0");
}

TEST(Catalog, TheReplacedFirstShapeActivityIsRejectedNotIgnored) {
  test::TempDir dir;
  auto text = read_text_file(test::data_dir() + "/gpus/p40.json");
  const auto at = text.find("\"first_autotune_batch\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"first_autotune_activity\": 0.36,\n  ");
  const auto root = data_dir_with(dir, "gpus/p40.json", text);
  try {
    (void)Catalog::load(root);
    FAIL() << "a GPU file with the old first_autotune_activity was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first_autotune_activity: replaced by first_autotune_batch"), std::string::npos)
        << e.what();
  }
}

TEST(Catalog, ASamplerStallAsLongAsItsProcessIsRejected) {
  expect_p40_field_rejected("nvidia_smi_stall_s", "5.0", "host.nvidia_smi_stall_s: must be shorter than");
  // A GPU file without them gets the P40 host's.
  const auto catalog = Catalog::load(test::data_dir());  // kept: gpu() returns a reference into it
  const auto& a100 = catalog.gpu("a100");
  EXPECT_GT(a100.host.nvidia_smi_process_s, a100.host.nvidia_smi_stall_s);
}

// The error loading the data folder gives once the model file's per-GPU object `field` is
// replaced by `replacement` ("" if it loads).
std::string error_with_per_gpu_entry(const std::string& model, const std::string& field, const std::string& replacement) {
  test::TempDir dir;
  auto text = read_text_file(test::data_dir() + "/models/" + model + ".json");
  const auto at = text.rfind("\"" + field + "\":");
  if (at == std::string::npos) return "no " + field + " in " + model + ".json";
  text.replace(at, text.find('}', at) + 1 - at, "\"" + field + "\": " + replacement);
  try {
    (void)Catalog::load(data_dir_with(dir, "models/" + model + ".json", text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Catalog, ClockIndependentFractionMustBeBelowOnePerGpu) {
  const auto error = error_with_per_gpu_entry("mobilenet_v2", "clock_independent_fraction", "{\"a100\": 1.0}");
  EXPECT_NE(error.find("models/mobilenet_v2.json: clock_independent_fraction.a100: must be in [0, 1)"), std::string::npos)
      << error;
  EXPECT_EQ(Catalog::load(test::data_dir()).model("mobilenet_v2").clock_independent_fraction.count("rtx3080ti"), 1U);
}

TEST(Catalog, GpuEfficiencyScaleMustBePositivePerGpu) {
  const auto error = error_with_per_gpu_entry("vgg19", "gpu_efficiency_scale", "{\"h200\": -1}");
  EXPECT_NE(error.find("models/vgg19.json: gpu_efficiency_scale.h200"), std::string::npos) << error;
  EXPECT_EQ(Catalog::load(test::data_dir()).model("vgg19").gpu_efficiency_scale.count("h200"), 1U);
}

// The error loading the data folder gives once the number of `field` in `file` (the value, not
// its "_prior") reads `value` ("" if it loads).
std::string error_with_value(const std::string& file, const std::string& field, const std::string& value) {
  test::TempDir dir;
  auto text = read_text_file(test::data_dir() + "/" + file);
  const auto at = text.rfind("\"" + field + "\":");
  if (at == std::string::npos) return "no " + field + " in " + file;
  text.replace(at, text.find_first_of(",\n}", at) - at, "\"" + field + "\": " + value);
  try {
    (void)Catalog::load(data_dir_with(dir, file, text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Catalog, APhaseSpreadAboveOneAndANegativePaddingGrowthAreRejected) {
  auto error = error_with_value("models/deepspeech2.json", "power_phase_spread", "1.5");
  EXPECT_NE(error.find("models/deepspeech2.json: power_phase_spread: must be in [0, 1]"), std::string::npos) << error;
  EXPECT_EQ(error_with_value("models/deepspeech2.json", "power_phase_spread", "0.5"), "");
  error = error_with_value("datasets/squad_train.json", "padding_growth", "-0.1");
  EXPECT_NE(error.find("datasets/squad_train.json: padding_growth"), std::string::npos) << error;
}

TEST(Catalog, TrainingSaturationScalesMustBePositiveAndDefaultToInferences) {
  auto error = error_with_value("models/resnet50.json", "training_saturation_scale", "0");
  EXPECT_NE(error.find("models/resnet50.json: training_saturation_scale"), std::string::npos) << error;
  error = error_with_value("models/resnet50.json", "training_power_saturation_scale", "-0.3");
  EXPECT_NE(error.find("models/resnet50.json: training_power_saturation_scale"), std::string::npos) << error;
  EXPECT_EQ(error_with_value("models/resnet50.json", "training_saturation_scale", "2.5"), "");
  const auto catalog = Catalog::load(test::data_dir());
  EXPECT_NE(catalog.model("resnet50").training_saturation_scale, 1.0);  // fitted to Zeus's traces
  EXPECT_DOUBLE_EQ(catalog.model("ncf").training_saturation_scale, 1.0);  // not given: as in inference
  EXPECT_DOUBLE_EQ(catalog.model("ncf").training_power_saturation_scale, 1.0);
  EXPECT_DOUBLE_EQ(catalog.model("resnet50").saturation_batch_scale, 1.0);  // never read from a file
}

TEST(Catalog, NegativeMemoryFiguresAreRejected) {
  auto error = error_with_value("gpus/v100-pcie.json", "memory_gib", "-32");
  EXPECT_NE(error.find("gpus/v100-pcie.json: memory_gib: must be >= 0"), std::string::npos) << error;
  error = error_with_value("gpus/rtx6000.json", "allocator_s", "-0.5");
  EXPECT_NE(error.find("gpus/rtx6000.json: host.allocator_s: must be >= 0"), std::string::npos) << error;
  // The model file gives it before its "_prior", which error_with_value would change instead.
  test::TempDir dir;
  auto text = read_text_file(test::data_dir() + "/models/deepspeech2.json");
  const auto at = text.find("\"training_mib_per_sample\":");
  ASSERT_LT(at, text.find("\"_prior\""));
  text.replace(at, text.find_first_of(",\n}", at) - at, "\"training_mib_per_sample\": -120");
  try {
    (void)Catalog::load(data_dir_with(dir, "models/deepspeech2.json", text));
    ADD_FAILURE() << "a negative training_mib_per_sample was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("models/deepspeech2.json: training_mib_per_sample: must be >= 0"),
              std::string::npos)
        << e.what();
  }
  const auto catalog = Catalog::load(test::data_dir());
  EXPECT_DOUBLE_EQ(catalog.gpu("v100-pcie").memory_gib, 32.0);  // Tesla V100-PCIE-32GB
  EXPECT_DOUBLE_EQ(catalog.gpu("v100").memory_gib, 0.0);        // SXM2 16 or 32 GB: not known
  EXPECT_GT(catalog.model("deepspeech2").training_mib_per_sample, 0.0);
}

TEST(Catalog, DuplicateNamesAreRejected) {
  test::TempDir dir;
  auto text = read_text_file(test::data_dir() + "/models/resnet50.json");
  text.replace(text.find("\"id\": \"resnet50\""), 16, "\"id\": \"vgg19\"");
  const auto root = data_dir_with(dir, "models/resnet50.json", text);
  EXPECT_THROW((void)Catalog::load(root), Error);
}

TEST(Catalog, MissingDirectoryIsAnIoError) {
  try {
    (void)Catalog::load("/nonexistent/gpucap-data");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
  }
}

}  // namespace
}  // namespace gpucap::sim
