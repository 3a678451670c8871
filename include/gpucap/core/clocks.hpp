#pragma once
// Supported clocks: GPUs take a clock from a discrete list.

#include <vector>

namespace gpucap {

// Nearest supported clock in an ascending, non-empty list (ties go down).
[[nodiscard]] double nearest_clock_mhz(const std::vector<double>& clocks_mhz, double mhz);

}  // namespace gpucap
