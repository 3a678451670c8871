#pragma once
// What `gpucap run` prints at the end of a run: the summary as text or JSON, every figure tagged
// simulated or real.

#include <nlohmann/json.hpp>

#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::cli {

// The summary's figures, each tagged [simulated] or [real].
void print_summary_lines(const runtime::RunSummary& s);
// A twin run: what ran (GPU, model, dataset, algorithm, cap, ...), then the summary's figures.
void print_text(const runtime::SimJobSpec& spec, const sim::Catalog& catalog, const runtime::RunSummary& s);
// The summary's figures as JSON (a real run adds what ran to it).
[[nodiscard]] nlohmann::json summary_json(const runtime::RunSummary& s);
// A twin run's summary and what ran, as JSON.
[[nodiscard]] nlohmann::json to_json(const runtime::SimJobSpec& spec, const sim::Catalog& catalog, const runtime::RunSummary& s);

}  // namespace gpucap::cli
