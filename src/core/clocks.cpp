#include "gpucap/core/clocks.hpp"

#include <algorithm>
#include <iterator>

namespace gpucap {

double nearest_clock_mhz(const std::vector<double>& clocks_mhz, double mhz) {
  const auto it = std::lower_bound(clocks_mhz.begin(), clocks_mhz.end(), mhz);
  if (it == clocks_mhz.begin()) return clocks_mhz.front();
  if (it == clocks_mhz.end()) return clocks_mhz.back();
  const double above = *it;
  const double below = *std::prev(it);
  return (above - mhz) < (mhz - below) ? above : below;
}

}  // namespace gpucap
