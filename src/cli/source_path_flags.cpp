#include "source_path_flags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "gpucap/core/error.hpp"

namespace gpucap::cli {

bool SourcePathFlags::any() const {
  return !p40_logs.empty() || !pctodl_params.empty() || !published.empty() || !zeus_traces.empty();
}

void SourcePathFlags::reject_unselected(const std::vector<calibrate::Source>& sources) const {
  for (const auto& [given, flag, source] : {std::tuple{&p40_logs, "--p40-logs", calibrate::Source::p40},
                                            std::tuple{&pctodl_params, "--pctodl-params", calibrate::Source::pctodl},
                                            std::tuple{&published, "--published", calibrate::Source::published},
                                            std::tuple{&zeus_traces, "--zeus-traces", calibrate::Source::zeus}}) {
    if (!given->empty() && std::find(sources.begin(), sources.end(), source) == sources.end()) {
      throw usage_error(fmt::format("{} is for a source --sources leaves out", flag));
    }
  }
}

void SourcePathFlags::apply(calibrate::SourcePaths& paths) const {
  if (!p40_logs.empty()) paths.p40_logs = p40_logs;
  if (!pctodl_params.empty()) paths.pctodl_params = pctodl_params;
  if (!published.empty()) paths.published = published;
  if (!zeus_traces.empty()) paths.zeus_traces = zeus_traces;
}

}  // namespace gpucap::cli
