#pragma once
// bobd — an offline search's answer, held online. BOBD (seed-systems.md §1.6) tunes batch size
// and SM clock offline for a cap, then the job runs at the configuration it found. For every cap
// the job will meet, the search is run before the job (runtime::search_each_cap) and its best
// configuration goes into a table; online, the controller looks up the cap in force and, when an
// outside controller changes the cap, switches to that cap's entry at once — what an operator
// who tuned every cap in advance would do. It never corrects itself from its windows: a
// configuration that was lucky in its offline measurement stays over the cap.

#include <memory>
#include <string>
#include <vector>

#include "gpucap/control/controller.hpp"

namespace gpucap::control {

// One cap's tuned configuration.
struct TunedEntry {
  double cap_w = 0.0;
  Knobs knobs;
};
using CapTable = std::vector<TunedEntry>;

// The entry for `cap_w`: the one tuned for that cap (within 1 mW), else the one tuned for the
// highest cap below it (its configuration stays under the lower cap), else the one for the lowest
// cap. Throws Error(usage) for an empty table.
[[nodiscard]] const TunedEntry& entry_for_cap(const CapTable& table, double cap_w);

struct TunedParams {
  DecisionPeriod period = DecisionPeriod::every_seconds(3.0);
  std::shared_ptr<const CapTable> table;  // not empty
};

class TunedController final : public Controller {
 public:
  // Throws Error(usage) without a table or with an empty one.
  explicit TunedController(TunedParams params);
  [[nodiscard]] std::string_view name() const override { return "bobd"; }
  [[nodiscard]] DecisionPeriod period() const override { return params_.period; }
  [[nodiscard]] Requirements requirements() const override;
  [[nodiscard]] Knobs initial_knobs(double cap_w) const override;
  [[nodiscard]] Knobs decide(const Observation& observation) override;
  [[nodiscard]] std::string describe_state() const override;
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

 private:
  TunedParams params_;
  double tuned_for_w_ = 0.0;  // the cap of the entry in use
};

}  // namespace gpucap::control
