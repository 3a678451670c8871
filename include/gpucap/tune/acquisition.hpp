#pragma once
// Acquisition functions of constrained Bayesian optimisation (BOBD, seed-systems.md §1.6), for a
// MAXIMISED objective (throughput) and a constraint c that is satisfied when c ≥ 0. Given in the
// log domain as well: far from the incumbent EI underflows to 0 at many points at once, and the
// log keeps them ordered, so the choice stays deterministic and meaningful.

namespace gpucap::tune {

// E[max(f − best, 0)] for f ~ N(mean, sd²); max(mean − best, 0) when sd = 0.
[[nodiscard]] double expected_improvement(double mean, double sd, double best);
[[nodiscard]] double log_expected_improvement(double mean, double sd, double best);

// P(c ≥ 0) for c ~ N(mean, sd²); 1 or 0 when sd = 0.
[[nodiscard]] double probability_feasible(double mean, double sd);
[[nodiscard]] double log_probability_feasible(double mean, double sd);

}  // namespace gpucap::tune
