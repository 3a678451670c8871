#include "gpucap/sched/stream_chain.hpp"

#include <algorithm>
#include <cstddef>

namespace gpucap::sched {
namespace {

constexpr int kBisections = 60;  // halves the bracket to ~1e-18 of its width: exact to a double

}  // namespace

double stream_chain_s(const std::vector<double>& kernels_s, double launch_s, int sync_every, int window) {
  std::vector<double> ends(kernels_s.size());
  double last_launch = 0.0;
  double end = 0.0;
  for (std::size_t i = 0; i < kernels_s.size(); ++i) {
    double at = last_launch + launch_s;
    if (sync_every > 0 && i > 0 && i % static_cast<std::size_t>(sync_every) == 0) at = std::max(at, end);
    if (window > 0 && i >= static_cast<std::size_t>(window)) at = std::max(at, ends[i - static_cast<std::size_t>(window)]);
    last_launch = at;
    end = std::max(end, at) + kernels_s[i];
    ends[i] = end;
  }
  return end;
}

std::vector<double> kernels_for_chain(const std::vector<double>& shape, double launch_s, double target_s) {
  std::vector<double> kernels(shape.size(), 0.0);
  if (stream_chain_s(kernels, launch_s, 0) >= target_s) return kernels;
  double total = 0.0;
  for (const double s : shape) total += s;
  if (!(total > 0.0)) return kernels;
  double lo = 0.0;
  double hi = target_s / total;  // the kernels alone then take target_s: the chain at least that
  for (int i = 0; i < kBisections; ++i) {
    const double mid = 0.5 * (lo + hi);
    for (std::size_t k = 0; k < shape.size(); ++k) kernels[k] = shape[k] * mid;
    (stream_chain_s(kernels, launch_s, 0) < target_s ? lo : hi) = mid;
  }
  for (std::size_t k = 0; k < shape.size(); ++k) kernels[k] = shape[k] * lo;
  return kernels;
}

double launch_for_chain(const std::vector<double>& kernels_s, int sync_every, double target_s) {
  if (kernels_s.empty() || stream_chain_s(kernels_s, 0.0, sync_every) >= target_s) return 0.0;
  double lo = 0.0;
  double hi = target_s / static_cast<double>(kernels_s.size());  // the launches alone then take target_s
  for (int i = 0; i < kBisections; ++i) {
    const double mid = 0.5 * (lo + hi);
    (stream_chain_s(kernels_s, mid, sync_every) < target_s ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace gpucap::sched
