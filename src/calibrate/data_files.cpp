#include "gpucap/calibrate/data_files.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::calibrate {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json& at_path(ordered_json& object, const std::string& dotted) {
  ordered_json* node = &object;
  for (const auto part : split(dotted, '.')) node = &(*node)[std::string(part)];
  return *node;
}

constexpr const char* kStagedSuffix = ".fitted";

ordered_json parse_for_update(const std::string& file) {
  try {
    return ordered_json::parse(read_text_file(file), nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    throw data_error(file, 0, fmt::format("cannot update: {}", e.what()));
  }
}

void load_as(FileKind kind, const std::string& path) {
  switch (kind) {
    case FileKind::gpu: (void)sim::load_gpu_spec(path); return;
    case FileKind::model: (void)sim::load_model_spec(path); return;
    case FileKind::dataset: (void)sim::load_dataset_spec(path); return;
  }
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

void write_fitted_parameters(const std::vector<FittedValues>& fits,
                             const std::function<std::string(const std::string& file)>& note_for) {
  struct Update {
    FileKind kind;
    ordered_json json;
  };
  std::map<std::string, Update> updates;
  for (const auto& fit : fits) {
    for (const auto& p : *fit.parameters) {
      const auto& file = data_file_of(*fit.fitted, p);
      if (file.empty()) throw Error(ErrorCode::internal, fmt::format("calibration: {} has no data file", p.name()));
      auto [it, fresh] = updates.try_emplace(file, Update{p.kind, {}});
      if (fresh) it->second.json = parse_for_update(file);
      auto& prior = it->second.json["_prior"][p.key];
      if (prior.is_null()) prior = parameter_value(*fit.start, p);
      at_path(it->second.json, p.key) = round_for_file(parameter_value(*fit.fitted, p));
    }
  }
  // Every new file is checked as the catalogue will read it before any is replaced: a fit that
  // leaves one invalid (a value at the edge of what a file may hold) changes none.
  std::vector<std::string> staged;
  const auto discard_staged = [&staged] {
    for (const auto& path : staged) std::remove(path.c_str());
  };
  for (auto& [file, update] : updates) {
    update.json["_calibration"] = note_for(file);
    const auto path = file + kStagedSuffix;
    try {
      write_text_file(path, update.json.dump(2) + "\n");
    } catch (const Error&) {
      discard_staged();  // a file that cannot be written: its own error, nothing changed
      throw;
    }
    staged.push_back(path);
    try {
      load_as(update.kind, path);
    } catch (const Error& e) {
      discard_staged();
      throw data_error(file, 0, fmt::format("the fitted values would not load, so no data file was changed: {}", e.what()));
    }
  }
  for (const auto& [file, update] : updates) {
    if (std::rename((file + kStagedSuffix).c_str(), file.c_str()) != 0) {
      const int saved = errno;
      discard_staged();
      throw Error(ErrorCode::io, fmt::format("{}: cannot write ({})", file, std::strerror(saved)));
    }
  }
}

}  // namespace gpucap::calibrate
