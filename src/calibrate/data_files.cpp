#include "gpucap/calibrate/data_files.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::calibrate {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json& at_path(ordered_json& object, const std::string& dotted) {
  ordered_json* node = &object;
  for (const auto part : split(dotted, '.')) node = &(*node)[std::string(part)];
  return *node;
}

}  // namespace

const std::string& data_file_of(const TwinParams& params, const FitParameter& p) {
  switch (p.kind) {
    case FileKind::gpu: return params.gpus.at(p.id).source_file;
    case FileKind::model: return params.models.at(p.id).source_file;
    case FileKind::dataset: return params.datasets.at(p.id).source_file;
  }
  throw Error(ErrorCode::internal, "calibration: unknown file kind");
}

double round_for_file(double value) {
  if (value == 0.0 || !std::isfinite(value)) return value;
  const double digits = 6.0 - std::ceil(std::log10(std::abs(value)));
  const double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

void write_fitted_parameters(const TwinParams& start, const TwinParams& fitted,
                             const std::vector<FitParameter>& parameters,
                             const std::function<std::string(const std::string& file)>& note_for) {
  std::map<std::string, std::vector<const FitParameter*>> by_file;
  for (const auto& p : parameters) {
    const auto& file = data_file_of(fitted, p);
    if (file.empty()) throw Error(ErrorCode::internal, fmt::format("calibration: {} has no data file", p.name()));
    by_file[file].push_back(&p);
  }
  for (const auto& [file, params] : by_file) {
    ordered_json json;
    try {
      json = ordered_json::parse(read_text_file(file), nullptr, true, /*ignore_comments=*/true);
    } catch (const nlohmann::json::exception& e) {
      throw data_error(file, 0, fmt::format("cannot update: {}", e.what()));
    }
    for (const auto* p : params) {
      auto& prior = json["_prior"][p->key];
      if (prior.is_null()) prior = parameter_value(start, *p);
      at_path(json, p->key) = round_for_file(parameter_value(fitted, *p));
    }
    json["_calibration"] = note_for(file);
    write_text_file(file, json.dump(2) + "\n");
  }
}

}  // namespace gpucap::calibrate
