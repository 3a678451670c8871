#pragma once
// A predictor built from a profile: fixed-configuration measurements (batch size, SM clock,
// memory clock) → (throughput, window-max power), such as the trials `gpucap tune --json` prints.
// At each profiled (SM clock, memory clock) it predicts every batch size between the smallest and
// the largest profiled one by interpolating linearly in log(batch size): throughput and power
// both bend with the batch size like a saturating curve, which is close to straight on a log axis
// between profiled sizes a factor of about √2 apart.

#include <optional>
#include <string>
#include <vector>

namespace gpucap::predict {

struct ProfileSample {
  int batch_size = 1;
  double sm_clock_mhz = 0.0;
  std::optional<double> memory_clock_mhz;  // nullopt: the driver's default
  double throughput_img_s = 0.0;
  double max_power_w = 0.0;  // the measurement's highest power sample
};

// The profiled batch sizes at one (SM clock, memory clock), in increasing order.
struct ProfileColumn {
  double sm_clock_mhz = 0.0;
  std::optional<double> memory_clock_mhz;
  std::vector<int> batch_sizes;
  std::vector<double> throughput_img_s;
  std::vector<double> max_power_w;

  [[nodiscard]] int min_batch() const { return batch_sizes.front(); }
  [[nodiscard]] int max_batch() const { return batch_sizes.back(); }
};

struct ProfilePrediction {
  double throughput_img_s = 0.0;
  double max_power_w = 0.0;
};

class ProfileModel {
 public:
  // Throws Error(invalid_data) for an empty profile, a batch size < 1, a clock <= 0, a negative or
  // non-finite figure, or the same configuration twice.
  explicit ProfileModel(const std::vector<ProfileSample>& samples);

  // Columns sorted by memory clock (default first), then SM clock.
  [[nodiscard]] const std::vector<ProfileColumn>& columns() const { return columns_; }
  [[nodiscard]] bool has_memory_clocks() const;
  // nullopt outside [min_batch, max_batch] of the column.
  [[nodiscard]] std::optional<ProfilePrediction> predict(const ProfileColumn& column, int batch_size) const;

 private:
  std::vector<ProfileColumn> columns_;
};

// Reads a profile file: a JSON object whose "trials" array holds objects with batch_size,
// sm_clock_mhz, memory_clock_mhz (number or null), throughput_img_s and max_power_w — what
// `gpucap tune --json` prints. Throws Error(io) or Error(invalid_data) naming the file.
[[nodiscard]] std::vector<ProfileSample> load_profile_json(const std::string& path);

// Where a profile was measured, as its file says: `gpucap tune --json` writes "simulated", "gpu"
// (the twin's id or the NVML name) and "model" (the twin's model id or the model file), and on a
// real GPU a "setup" (tune's --out trial file holds the same one) with the engine's "precision",
// "input_size" and "engine_device" (a file with a setup and no "simulated", as a trial file of
// tune's or run's --out/--search-out, was measured on a real GPU). A field the file does not hold
// stays empty and is not compared: a profile written by hand or by an older gpucap is taken as it
// is.
struct ProfileOrigin {
  std::optional<bool> simulated;
  std::optional<std::string> gpu;
  std::optional<std::string> model;          // the twin's id, or the model file's name without folder and extension
  std::optional<std::string> precision;      // fp32, fp16, bf16
  std::optional<long long> input_size;       // height = width of the images
  std::optional<std::string> engine_device;  // cpu, cuda or cuda:N (compared by kind: cuda:1 runs as cuda does)
};
// Reads the origin of a profile file; Error(invalid_data) for a field of the wrong type.
[[nodiscard]] ProfileOrigin load_profile_origin(const std::string& path);
// The first field both origins name that differs, as a phrase ("it was measured with precision
// fp32, and this runs fp16"); nullopt when none does. A profile measured under other conditions
// predicts other batch times and powers, and a controller planning from it would miss the SLO or
// the cap without a word.
[[nodiscard]] std::optional<std::string> profile_mismatch(const ProfileOrigin& measured, const ProfileOrigin& here);

}  // namespace gpucap::predict
