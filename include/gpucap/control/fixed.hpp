#pragma once
// A controller that holds one configuration: what an offline search's fixed-configuration
// measurement runs (BOBD's evaluation harness, the oracle's grid).

#include <string>
#include <string_view>

#include "gpucap/control/controller.hpp"

namespace gpucap::control {

class FixedController final : public Controller {
 public:
  FixedController(Knobs knobs, DecisionPeriod period) : knobs_(std::move(knobs)), period_(period) {}
  [[nodiscard]] std::string_view name() const override { return "fixed"; }
  [[nodiscard]] DecisionPeriod period() const override { return period_; }
  [[nodiscard]] Requirements requirements() const override {
    return {knobs_.sm_clock_mhz.has_value(), knobs_.mem_clock_mhz.has_value(), knobs_.power_limit_w.has_value()};
  }
  [[nodiscard]] Knobs initial_knobs(double /*cap_w*/) const override { return knobs_; }
  [[nodiscard]] Knobs decide(const Observation&) override { return knobs_; }
  [[nodiscard]] std::string describe_state() const override { return describe(knobs_); }

 private:
  Knobs knobs_;
  DecisionPeriod period_;
};

}  // namespace gpucap::control
