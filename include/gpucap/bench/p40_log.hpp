#pragma once
// Reader for the real Tesla P40 controller logs published with BatchDVFS (format in
// ../shared/data/README.md): per-step rows of a BatchDVFS, Clipper-style or DVFS run.
// Columns are found by their header names, the summary block after the data is ignored, and
// every malformed field is reported as FILE:LINE.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::bench {

enum class P40LogKind { batchdvfs, clipper, dvfs };

[[nodiscard]] const char* to_string(P40LogKind kind);
// "batchdvfs", "clipper", "dvfs" (also "dvfs256"); throws Error(usage).
[[nodiscard]] P40LogKind parse_p40_log_kind(std::string_view name);

struct P40LogRow {
  std::size_t line = 0;
  double time_s = 0.0;              // unix seconds
  double throughput_img_s = 0.0;
  double power_w = 0.0;             // the window maximum the controller saw at this step
  double cap_w = 0.0;
  int batch_size = 0;
  std::optional<int> min_index;     // batchdvfs: binary-search state (batch index = size - 1)
  std::optional<int> max_index;
  std::optional<int> best_index;    // batchdvfs and clipper
  std::optional<double> clock_mhz;  // batchdvfs and dvfs
};

struct P40Log {
  std::string path;
  P40LogKind kind = P40LogKind::batchdvfs;
  std::vector<P40LogRow> rows;
};

// Throws Error(io) if unreadable, Error(invalid_data) "FILE:LINE: ..." if malformed or if the
// header lacks a column the kind needs.
[[nodiscard]] P40Log read_p40_log(const std::string& path, P40LogKind kind);

// One line of a 1-Hz `nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,
// power.draw,clocks.sm` log.
struct SmiSample {
  std::size_t line = 0;
  double time_s = 0.0;       // the timestamp read as UTC (nvidia-smi writes local time; see align)
  double gpu_util_pct = 0.0; // share of the last sample period in which a kernel ran
  double mem_util_pct = 0.0;
  double power_w = 0.0;
  double sm_clock_mhz = 0.0;
};

// Reads such a log (units after the numbers are optional; the summary block after the data is
// ignored). Error(io) / Error(invalid_data) "FILE:LINE: ..." as read_p40_log.
[[nodiscard]] std::vector<SmiSample> read_nvidia_smi_log(const std::string& path);

// nvidia-smi stamps local time, the controller logs Unix time: the whole-hour shift (−14..+14 h)
// that best lines the two logs' spans up, in seconds, to add to SmiSample::time_s.
[[nodiscard]] double smi_time_offset_s(const std::vector<SmiSample>& smi, const P40Log& log);

}  // namespace gpucap::bench
