#pragma once
// Zeus's cost of a training run (NSDI'23, eq. 2): a knob η trades energy against time, with time
// priced at the GPUs' largest power limit so that both terms are in joules.

namespace gpucap::bso {

// η·energy + (1−η)·max_power·time, in J.
[[nodiscard]] inline double zeus_cost(double energy_j, double time_s, double eta, double max_power_w) {
  return eta * energy_j + (1.0 - eta) * max_power_w * time_s;
}

}  // namespace gpucap::bso
