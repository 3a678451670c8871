#include "gpucap/runtime/mps_profile.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/mps_model.hpp"

namespace gpucap::runtime {

namespace {

struct StressLevel {
  int share_pct;
  std::vector<int> tenant_counts;
  std::vector<int> batches;
};

// §2.3: the tenant counts and batch ranges PctoDL profiles at each share.
const std::vector<StressLevel>& stress_levels() {
  static const std::vector<StressLevel> levels = {
      {5, {1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20}, {4, 8, 16, 24}},
      {10, {1, 2, 4, 6, 8, 10}, {4, 8, 16, 24, 32, 48}},
      {15, {1, 2, 3, 4, 5, 6}, {4, 8, 16, 24, 32, 48, 64}},
      {20, {1, 2, 3, 4, 5}, {4, 8, 16, 32, 64, 96, 128}},
      {25, {1, 2, 3, 4}, {4, 8, 16, 32, 64, 96, 128, 160}},
      {30, {1, 2, 3}, {4, 8, 16, 32, 64, 96, 128, 160}},
      {35, {1, 2}, {4, 8, 16, 32, 64, 96, 128, 160, 192, 256}},
      {40, {1, 2}, {4, 8, 16, 32, 64, 96, 128, 160, 192, 256}},
  };
  return levels;
}

ProfileConfig homogeneous(int tenants, int share_pct, int batch, double sm_mhz, double memory_mhz) {
  const auto n = static_cast<std::size_t>(tenants);
  return ProfileConfig{std::vector<double>(n, share_pct), std::vector<int>(n, batch), sm_mhz, memory_mhz};
}

// The supported SM clocks in ascending order (NVML lists them highest first).
std::vector<double> ascending_clocks(std::vector<double> sm_clocks_mhz) {
  if (sm_clocks_mhz.empty()) throw usage_error("profile: the GPU lists no supported SM clocks");
  std::sort(sm_clocks_mhz.begin(), sm_clocks_mhz.end());
  return sm_clocks_mhz;
}

template <typename T>
std::string python_list(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += fmt::format("{}{:g}", i == 0 ? "" : ", ", static_cast<double>(values[i]));
  return out + "]";
}

}  // namespace

std::vector<ProfileConfig> pctodl_profile_configs(const std::vector<double>& supported_mhz, double memory_clock_mhz,
                                                  bool sweeps) {
  const auto sm_clocks_mhz = ascending_clocks(supported_mhz);
  const double lowest = sm_clocks_mhz.front(), highest = sm_clocks_mhz.back();
  std::vector<ProfileConfig> configs;
  for (const auto& level : stress_levels()) {
    for (const int n : level.tenant_counts) {
      if (n * level.share_pct > 100) continue;
      for (const int b : level.batches) {
        configs.push_back(homogeneous(n, level.share_pct, b, highest, memory_clock_mhz));
      }
    }
  }
  if (sweeps) {
    for (const auto& [n, share] : std::vector<std::pair<int, int>>{{4, 25}, {2, 50}, {10, 10}}) {
      for (const int b : {8, 16, 32}) {
        for (double f = lowest; f <= highest; f += 150.0) {
          configs.push_back(homogeneous(n, share, b, nearest_clock_mhz(sm_clocks_mhz, f), memory_clock_mhz));
        }
      }
    }
  }
  return configs;
}

ProfileRow measure_profile_row(const SimTrialRunner& runner, const sim::GpuSpec& gpu, const sim::ModelSpec& model,
                               const ProfileConfig& config) {
  Knobs knobs;
  knobs.tenants.clear();
  std::vector<sim::MpsTenant> tenants;
  for (std::size_t i = 0; i < config.shares_pct.size(); ++i) {
    knobs.tenants.push_back(TenantKnobs{config.shares_pct[i], config.batches[i]});
    tenants.push_back(sim::MpsTenant{config.shares_pct[i], config.batches[i]});
  }
  knobs.sm_clock_mhz = config.sm_clock_mhz;
  knobs.mem_clock_mhz = config.memory_clock_mhz;
  ProfileRow row;
  row.config = config;
  row.measured = runner.measure_knobs(knobs);
  row.sm_clock_mhz = config.sm_clock_mhz;  // locked; no power limit is set while profiling
  const sim::OperatingPoint point{config.sm_clock_mhz, config.memory_clock_mhz};
  const auto steady = sim::profile_mps(gpu, model, model.precision, tenants, point);
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const auto& batch = steady.tenants[i].batch;
    row.sm_util_pct += tenants[i].share_pct * batch.busy_s / batch.latency_s();
  }
  row.sm_util_pct = std::min(100.0, row.sm_util_pct);
  row.memory_util_pct = 100.0 * steady.memory_activity;
  return row;
}

std::string profile_csv_header() {
  return "model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,throughput_total,power_avg,"
         "power_max\n";
}

std::string profile_csv_row(const std::string& model, const ProfileRow& row) {
  return fmt::format("{},\"{}\",\"{}\",{:g},{:g},{:g},{:.2f},{:.2f},{:.3f},{:.3f},{:.3f}\n", model,
                     python_list(row.config.shares_pct), python_list(row.config.batches), row.config.sm_clock_mhz,
                     row.config.memory_clock_mhz, row.sm_clock_mhz, row.sm_util_pct, row.memory_util_pct,
                     row.measured.throughput_img_s, row.measured.mean_power_w, row.measured.max_power_w);
}

std::vector<ProfileConfig> whole_gpu_profile_configs(const std::vector<double>& supported_mhz,
                                                     double memory_clock_mhz) {
  const auto sm_clocks_mhz = ascending_clocks(supported_mhz);
  const double lowest = sm_clocks_mhz.front(), highest = sm_clocks_mhz.back();
  std::vector<ProfileConfig> configs;
  std::vector<double> clocks;
  for (double f = lowest; f < highest; f += 150.0) clocks.push_back(nearest_clock_mhz(sm_clocks_mhz, f));
  clocks.push_back(highest);
  for (const auto& [n, share] : std::vector<std::pair<int, int>>{{1, 100}, {2, 50}}) {
    for (const int b : {4, 8, 16, 32, 64, 128, 256}) {
      for (const double f : clocks) configs.push_back(homogeneous(n, share, b, f, memory_clock_mhz));
    }
  }
  // Unequal tenants that fill the GPU, at every third clock.
  const std::vector<std::vector<double>> unequal = {{55, 45}, {65, 35}, {75, 25}, {40, 30, 30}, {35, 35, 30}, {50, 25, 25}};
  const std::vector<std::vector<int>> batch_sets = {{64, 64, 64}, {128, 64, 64}, {256, 128, 128}, {192, 192, 192}, {256, 256, 256}};
  for (const auto& shares : unequal) {
    for (const auto& batch_set : batch_sets) {
      const std::vector<int> batches(batch_set.begin(), batch_set.begin() + static_cast<std::ptrdiff_t>(shares.size()));
      for (std::size_t i = 0; i < clocks.size(); i += 3) {
        configs.push_back(ProfileConfig{shares, batches, clocks[i], memory_clock_mhz});
      }
    }
  }
  return configs;
}

}  // namespace gpucap::runtime
