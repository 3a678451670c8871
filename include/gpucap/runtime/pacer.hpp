#pragma once
// Pacing the twin: its virtual time follows the wall clock (× a speed factor), so that a person
// without a GPU can watch a run's metrics move and a test can scrape a run in progress. The pacer
// sits at the clock boundary — after each batch of the simulated engine, at each event of the
// share simulator — and only sleeps; nothing the controllers see changes.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gpucap/engine/engine.hpp"

namespace gpucap::runtime {

// --pace: "realtime" (1) or a speed factor, virtual seconds per wall second, in [0.01, 10000];
// Error(usage) otherwise.
[[nodiscard]] double parse_pace(const std::string& text);

class Pacer {
 public:
  using WallClock = std::function<double()>;    // seconds, monotonic
  using Sleep = std::function<void(double)>;    // sleeps this many seconds
  // Virtual time runs `factor` times as fast as `wall` (defaults: steady_clock, this_thread::sleep).
  explicit Pacer(double factor, WallClock wall = {}, Sleep sleep = {});
  // Sleeps until the wall clock has caught up with `virtual_s`; the first call sets the origin of
  // both clocks. Never sleeps for virtual time that went backwards.
  void wait_until(double virtual_s);
  [[nodiscard]] double factor() const { return factor_; }

 private:
  double factor_;
  WallClock wall_;
  Sleep sleep_;
  std::optional<double> virtual_origin_s_;
  double wall_origin_s_ = 0.0;
};

// An engine whose batches end no sooner in wall time than in the twin's virtual time (× factor).
class PacedEngine final : public engine::Engine {
 public:
  // `inner` and `virtual_now_s` must outlive this engine.
  PacedEngine(engine::Engine& inner, std::function<double()> virtual_now_s, Pacer pacer);
  [[nodiscard]] std::string name() const override { return inner_.name(); }
  engine::BatchResult run_batch(int batch_size) override;
  engine::BatchResult run_tenants(const std::vector<TenantKnobs>& tenants) override;

 private:
  engine::Engine& inner_;
  std::function<double()> virtual_now_s_;
  Pacer pacer_;
};

}  // namespace gpucap::runtime
