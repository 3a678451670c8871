#pragma once
// Calibration observations from real-GPU sweeps: the trial files that `gpucap tune --platform nvml
// --out` writes (sweep-*.json of scripts/gpu-measure.sh) in the measurement folders that
// data/calibration/real.json lists, each with the twin GPU it ran on and whether calibration fits
// it ("fit") or only compares with it ("check"). Each trial is one batch size run back to back at
// the GPU's own clocks with the input already on the GPU: the twin runs it at its boost clock, as
// far as the board's power limit lets it.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gpucap/calibrate/model.hpp"

namespace gpucap::calibrate {

struct RealSweepPoint {
  std::string folder;  // the folder's name, e.g. "2026-11-26-NVIDIA_H200"
  std::string use;     // "fit" or "check"
  std::string gpu;     // the twin's GPU id
  std::string model;   // the twin's model id (the trial file's model file name)
  sim::Precision precision = sim::Precision::fp32;
  int batch = 0;
  double throughput_img_s = 0.0;
  double mean_power_w = 0.0;
  double max_power_w = 0.0;  // the highest sample of the measurement
};

// Error(io/invalid_data) naming the file for a bad setup or trial file; Error(usage) for a GPU or
// model the catalogue lacks. Trial files measured at locked clocks are refused: the source takes
// the GPU's own clocks only.
[[nodiscard]] std::vector<RealSweepPoint> load_real_sweeps(const std::string& setup_path, const sim::Catalog& catalog);

// The twin's figures for one point: throughput, the time-averaged power, the highest sensor reading.
struct RealPrediction {
  double throughput_img_s = 0.0;
  double mean_power_w = 0.0;
  double max_power_w = 0.0;
};
[[nodiscard]] RealPrediction predict_real_point(const TwinParams& params, const RealSweepPoint& point);

// Per point: throughput and mean power (group = the folder's use), and the highest reading (group
// "check": a sample maximum, compared but never fitted). Source = "real-GPU FOLDER".
[[nodiscard]] std::vector<Observation> real_observations(const std::vector<RealSweepPoint>& points);

// The power and timing coefficients of every GPU a "fit" folder ran on.
[[nodiscard]] std::vector<FitParameter> real_fit_parameters(const std::vector<RealSweepPoint>& points,
                                                            const sim::Catalog& catalog);

// The measurements against themselves: where two folders measured one (GPU, model, precision,
// batch), each later point's |difference| relative to the first — how far runs on machines of one
// kind differ. Keyed by (row source "real-GPU vs itself", quantity): throughput_img_s, mean_power_w.
[[nodiscard]] std::map<std::pair<std::string, std::string>, std::vector<double>> real_repeat_errors(
    const std::vector<RealSweepPoint>& points);

// One point beside the twin's prediction for it.
struct RealPointFidelity {
  RealSweepPoint point;
  RealPrediction twin;
};

// The section of docs/fidelity.md on real GPUs: every point beside the twin's prediction. Empty
// without points.
[[nodiscard]] std::string real_markdown(const std::vector<RealPointFidelity>& points);

}  // namespace gpucap::calibrate
