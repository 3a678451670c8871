// The serve matrix's checks: the targets judged from a report's figures (PASS or MISS,
// with by how much).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpucap/bench/serve_bench.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::bench {
namespace {

constexpr const char* kCapserve = "capserve";
constexpr const char* kStatic = "static";

std::string percent(double fraction) { return fmt::format("{:.2f} %", 100.0 * fraction); }

// Beside a static setting that capserve did not beat: what the oracle (the best static setting
// under the segment's cap) answered, so a reader sees whether static's lead is one any setting
// under the cap has, or one it took by running over the cap.
std::string oracle_beside_static(const ServeCell& cell, std::size_t segment, const ServeFigures& static_figures) {
  if (segment >= cell.oracle.size() || !cell.oracle[segment].setting) return "; no oracle";
  const double oracle_rps = cell.oracle[segment].figures.goodput_rps;
  const bool over_cap_lead = static_figures.windows_over_cap_outside_transitions > 0 && oracle_rps < static_figures.goodput_rps;
  return fmt::format("; oracle under the cap {:.1f}{}", oracle_rps, over_cap_lead ? ": static's lead is over the cap" : "");
}

}  // namespace

std::vector<ServeCheck> serve_checks(const ServeBenchReport& report, const ServeTargets& targets) {
  std::vector<ServeCheck> checks;
  const auto find_cell = [](const ServeModelResult& r, double load) -> const ServeCell* {
    for (const auto& c : r.cells) {
      if (std::abs(c.load - load) < 1e-9) return &c;
    }
    return nullptr;
  };
  for (const auto& r : report.results) {
    const auto add = [&](std::string what, std::string target) -> ServeCheck& {
      checks.push_back(ServeCheck{r.gpu, r.model, std::move(what), std::move(target), "", false, true});
      return checks.back();
    };
    const auto not_run = [](ServeCheck& c, std::string why) {
      c.run = false;
      c.measured = std::move(why);
    };
    const auto load_name = [](double load) { return fmt::format("{:g} %", 100.0 * load); };
    // At the SLO load.
    const auto* cell = find_cell(r, targets.slo_load);
    const auto* capserve = cell != nullptr ? cell->run(kCapserve) : nullptr;
    {
      auto& c = add(fmt::format("SLO attainment at {} load, every segment", load_name(targets.slo_load)),
                    fmt::format(">= {:g} %", 100.0 * targets.attainment));
      if (capserve == nullptr) {
        not_run(c, "no such cell or no capserve run");
      } else {
        std::vector<std::string> parts;
        c.pass = true;
        for (const auto& s : capserve->segments) {
          parts.push_back(fmt::format("{:g} W: {}", s.cap_w, percent(s.slo_attainment)));
          if (s.slo_attainment < targets.attainment) c.pass = false;
        }
        c.measured = join(parts, ", ");
      }
    }
    {
      auto& c = add(fmt::format("windows over the cap at {} load", load_name(targets.slo_load)),
                    fmt::format("<= {:g} % of the run's", targets.over_cap_pct));
      if (capserve == nullptr) {
        not_run(c, "no such cell or no capserve run");
      } else {
        const auto& t = capserve->total;
        c.pass = t.over_cap_pct() <= targets.over_cap_pct;
        c.measured = fmt::format("{:.2f} % ({} of {}; outside cap transitions {})", t.over_cap_pct(), t.windows_over_cap,
                                 t.windows, t.windows_over_cap_outside_transitions);
      }
    }
    {
      auto& c = add(fmt::format("goodput against the oracle at {} load, every segment", load_name(targets.slo_load)),
                    fmt::format(">= {:g} %", 100.0 * targets.of_oracle));
      if (capserve == nullptr) {
        not_run(c, "no such cell or no capserve run");
      } else {
        std::vector<std::string> parts;
        bool judged = true;
        c.pass = true;
        for (std::size_t k = 0; k < capserve->segments.size() && k < cell->oracle.size(); ++k) {
          const auto& s = capserve->segments[k];
          const auto& o = cell->oracle[k];
          if (!o.setting || !(o.figures.goodput_rps > 0.0)) {
            parts.push_back(fmt::format("{:g} W: no oracle", s.cap_w));
            judged = false;
            continue;
          }
          const double ratio = s.goodput_rps / o.figures.goodput_rps;
          parts.push_back(fmt::format("{:g} W: {:.1f} % ({:.1f} / {:.1f} req/s)", s.cap_w, 100.0 * ratio, s.goodput_rps,
                                      o.figures.goodput_rps));
          if (ratio < targets.of_oracle) c.pass = false;
        }
        c.measured = join(parts, ", ");
        if (!judged && c.pass) c.run = false;
      }
    }
    // Against the static setting, every cell and segment.
    {
      auto& higher = add("goodput above static where static misses the SLO or the cap (every cell and segment)",
                         "higher, or every request within the SLO");
      std::vector<std::string> higher_misses;
      int higher_cases = 0;
      int higher_equal_all_good = 0;
      std::vector<std::string> lower_misses;
      int lower_cases = 0;
      double worst_ratio = std::numeric_limits<double>::infinity();
      for (const auto& cl : r.cells) {
        const auto* cs = cl.run(kCapserve);
        const auto* st = cl.run(kStatic);
        if (cs == nullptr || st == nullptr) continue;
        for (std::size_t k = 0; k < cs->segments.size() && k < st->segments.size(); ++k) {
          const auto& a = cs->segments[k];
          const auto& b = st->segments[k];
          const bool static_misses = b.slo_attainment < targets.attainment || b.windows_over_cap_outside_transitions > 0;
          const auto where = fmt::format("{} load {:g} W", load_name(cl.load), a.cap_w);
          if (static_misses) {
            ++higher_cases;
            // Where capserve answered every request of the segment within the SLO, no goodput is
            // higher than its own: equal to static's then counts as met (and is counted apart).
            const bool all_good = a.good == a.arrivals && a.good >= b.good;
            if (all_good && !(a.good > b.good)) ++higher_equal_all_good;
            if (!(a.good > b.good) && !all_good) {
              higher_misses.push_back(fmt::format("{} ({:.1f} vs {:.1f} req/s{})", where, a.goodput_rps, b.goodput_rps,
                                                  oracle_beside_static(cl, k, b)));
            }
          }
          ++lower_cases;
          const double ratio = b.goodput_rps > 0.0 ? a.goodput_rps / b.goodput_rps : std::numeric_limits<double>::infinity();
          worst_ratio = std::min(worst_ratio, ratio);
          if (ratio < 1.0 - targets.static_margin) {
            lower_misses.push_back(fmt::format("{} ({:.1f} vs {:.1f} req/s, {:+.1f} %)", where, a.goodput_rps, b.goodput_rps,
                                               100.0 * (ratio - 1.0)));
          }
        }
      }
      if (lower_cases == 0) {
        not_run(higher, "no capserve and static runs");
      } else {
        higher.pass = higher_misses.empty();
        const auto equal = higher_equal_all_good > 0
                               ? fmt::format(" ({} of them equal: both answer every request within the SLO)",
                                             higher_equal_all_good)
                               : std::string();
        higher.measured = higher_misses.empty()
                              ? fmt::format("met in all {} cell-segments where static misses{}", higher_cases, equal)
                              : fmt::format("not higher in {} of {}{}: {}", higher_misses.size(), higher_cases, equal,
                                            join(higher_misses, "; "));
      }
      auto& lower = add("goodput never more than 2 % below static (every cell and segment)",
                        fmt::format(">= {:g} % of static", 100.0 * (1.0 - targets.static_margin)));
      if (lower_cases == 0) {
        not_run(lower, "no capserve and static runs");
      } else {
        lower.pass = lower_misses.empty();
        lower.measured = lower_misses.empty()
                             ? fmt::format("worst {:.1f} % of static over {} cell-segments", 100.0 * worst_ratio, lower_cases)
                             : fmt::format("lower by more than {:g} % in {} of {}: {}", 100.0 * targets.static_margin,
                                           lower_misses.size(), lower_cases, join(lower_misses, "; "));
      }
    }
    // Overload.
    const auto* over = find_cell(r, targets.overload);
    const auto* capserve_over = over != nullptr ? over->run(kCapserve) : nullptr;
    {
      auto& c = add(fmt::format("goodput at {} load against the capacity under each segment's cap", load_name(targets.overload)),
                    fmt::format(">= {:g} %", 100.0 * targets.of_capacity));
      if (capserve_over == nullptr) {
        not_run(c, "no such cell or no capserve run");
      } else {
        std::vector<std::string> parts;
        c.pass = true;
        for (const auto& s : capserve_over->segments) {
          const auto* cap = r.capacity_at(s.cap_w);
          const double capacity = cap != nullptr ? cap->capacity_rps : 0.0;
          const double ratio = capacity > 0.0 ? s.goodput_rps / capacity : 0.0;
          parts.push_back(fmt::format("{:g} W: {:.1f} % ({:.1f} / {:.1f} req/s)", s.cap_w, 100.0 * ratio, s.goodput_rps, capacity));
          if (ratio < targets.of_capacity) c.pass = false;
        }
        c.measured = join(parts, ", ");
      }
    }
    {
      auto& c = add(fmt::format("queue bounded at {} load (and no request left failing)", load_name(targets.overload)),
                    "max queue <= capacity × SLO, 0 failed");
      if (capserve_over == nullptr) {
        not_run(c, "no such cell or no capserve run");
      } else {
        std::vector<std::string> parts;
        c.pass = capserve_over->total.failed == 0;
        for (const auto& s : capserve_over->segments) {
          const auto* cap = r.capacity_at(s.cap_w);
          const double bound = cap != nullptr ? cap->capacity_rps * report.matrix.slo_s : 0.0;
          parts.push_back(fmt::format("{:g} W: {} (bound {:.0f})", s.cap_w, s.max_queued_requests, bound));
          if (static_cast<double>(s.max_queued_requests) > bound) c.pass = false;
        }
        c.measured = fmt::format("{}; failed {}", join(parts, ", "), capserve_over->total.failed);
      }
    }
  }
  return checks;
}

}  // namespace gpucap::bench
