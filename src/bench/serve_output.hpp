#pragma once
// What the serve matrix's report (serve_report.cpp) and plots (serve_plots.cpp) share: the oracle's
// whole-run figures, how loads are written, the plots' colours. Internal to src/bench.

#include <cstddef>
#include <string>

#include "gpucap/bench/serve_bench.hpp"

namespace gpucap::bench::serve_output {

inline constexpr const char* kOracle = "oracle";

[[nodiscard]] std::string colour(std::size_t i);
[[nodiscard]] std::string load_text(double load);  // "70 %"
[[nodiscard]] std::string load_tag(double load);   // "70", for file names
// The oracle over the whole run: its segments' figures added up (p99: the worst segment's).
[[nodiscard]] ServeFigures oracle_total(const ServeCell& cell);
// Every segment of the cell has an oracle setting.
[[nodiscard]] bool oracle_complete(const ServeCell& cell);

}  // namespace gpucap::bench::serve_output
