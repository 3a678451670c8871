#pragma once
// A power cap that changes at given times, as an outside controller would set it:
// constant, or steps such as BatchDVFS's sensitivity runs (150 → 125 → 100 W every 85 s)
// and PctoDL tasks 29/30.

#include <string>
#include <string_view>
#include <vector>

namespace gpucap {

struct CapStep {
  double time_s = 0.0;  // from the start of the run
  double cap_w = 0.0;

  bool operator==(const CapStep&) const = default;
};

class CapSchedule {
 public:
  [[nodiscard]] static CapSchedule constant(double cap_w);

  // Steps must start at time 0, have strictly increasing times and positive finite caps.
  // Throws Error(usage) naming the problem otherwise.
  [[nodiscard]] static CapSchedule from_steps(std::vector<CapStep> steps);

  // Parses "0:150,85:125,170:100" (seconds:watts). If the first step is later than 0,
  // `initial_cap_w` (the --power-cap value) holds until then; without it that is an error.
  [[nodiscard]] static CapSchedule parse(std::string_view text, const double* initial_cap_w = nullptr);

  [[nodiscard]] double cap_at(double time_s) const;
  [[nodiscard]] const std::vector<CapStep>& steps() const { return steps_; }
  [[nodiscard]] bool is_constant() const { return steps_.size() == 1; }
  [[nodiscard]] double min_cap_w() const;
  [[nodiscard]] double max_cap_w() const;
  // Every cap the schedule sets, once, in the order they first apply.
  [[nodiscard]] std::vector<double> distinct_caps() const;

  // Throws Error(usage) if any cap lies outside [min_w, max_w]; `what` names the limits.
  void check_range(double min_w, double max_w, std::string_view what) const;

  // "150 W" or "0:150,85:125,170:100".
  [[nodiscard]] std::string to_string() const;

 private:
  explicit CapSchedule(std::vector<CapStep> steps) : steps_(std::move(steps)) {}
  std::vector<CapStep> steps_;
};

}  // namespace gpucap
