#include "gpucap/bench/matrix.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::bench {

Matrix load_matrix(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  Matrix matrix;
  matrix.id = f.string("id");
  matrix.description = f.string_or("description", "");
  matrix.gpu = f.string("gpu");
  if (f.has("mps")) {
    const JsonFields mps(f.at("mps"), path, "mps.");
    MatrixMps m;
    const auto max_tenants = mps.positive_integer("oracle_max_tenants");
    if (max_tenants > 4) throw mps.error("oracle_max_tenants", "must be between 1 and 4 (the search grows steeply)");
    m.oracle_max_tenants = static_cast<std::size_t>(max_tenants);
    const auto& shares = mps.at("morak_shares_pct");
    if (!shares.is_array() || shares.empty()) throw mps.error("morak_shares_pct", "must be a non-empty array");
    m.morak_shares_pct.clear();
    double total = 0.0;
    for (const auto& share : shares) {
      if (!share.is_number() || !(share.get<double>() >= 5.0 && share.get<double>() <= 100.0) ||
          std::fmod(share.get<double>(), 5.0) != 0.0) {
        throw mps.error("morak_shares_pct", "each share must be a multiple of 5 in [5, 100]");
      }
      total += share.get<double>();
      m.morak_shares_pct.push_back(share.get<double>());
    }
    if (total > 100.0) throw mps.error("morak_shares_pct", "the shares add up to more than 100 %");
    matrix.mps = m;
  }
  const auto& jobs = f.at("jobs");
  if (!jobs.is_array() || jobs.empty()) throw f.error("jobs", "must be a non-empty array");
  std::set<std::string> ids;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const JsonFields job_fields(jobs[i], path, fmt::format("jobs[{}].", i));
    MatrixJob job;
    job.id = job_fields.string("id");
    // Ids name trace files: letters, digits, '.', '_' and '-' only, so they stay inside --out.
    const bool safe = std::all_of(job.id.begin(), job.id.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    });
    if (!safe || job.id == "." || job.id == "..") {
      throw job_fields.error("id", fmt::format("'{}' may only contain letters, digits, '.', '_' and '-'", job.id));
    }
    if (!ids.insert(job.id).second) throw job_fields.error("id", fmt::format("duplicate job id '{}'", job.id));
    job.model = job_fields.string("model");
    job.dataset = job_fields.string("dataset");
    job.note = job_fields.string_or("note", "");
    const bool has_cap = job_fields.has("cap_w");
    const bool has_schedule = job_fields.has("schedule");
    if (has_cap == has_schedule) throw job_fields.error("cap_w", "give exactly one of cap_w and schedule");
    try {
      job.schedule = has_cap ? CapSchedule::constant(job_fields.positive("cap_w"))
                             : CapSchedule::parse(job_fields.string("schedule"));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::usage) throw;
      throw job_fields.error("schedule", e.what());
    }
    if (job_fields.has("images")) job.images = job_fields.positive_integer("images");
    if (job_fields.has("duration_s")) job.duration_s = job_fields.positive("duration_s");
    if (job_fields.has("alpha")) job.controller.alpha = job_fields.fraction("alpha");
    if (job_fields.has("window")) {
      try {
        job.controller.window = control::DecisionPeriod::parse(job_fields.string("window"));
      } catch (const Error& e) {
        throw job_fields.error("window", e.what());
      }
    }
    matrix.jobs.push_back(std::move(job));
  }
  return matrix;
}

std::string matrix_path(const std::string& data_dir, const std::string& name_or_path) {
  if (std::filesystem::path(name_or_path).extension() == ".json") return name_or_path;
  const auto path = std::filesystem::path(data_dir) / "matrices" / (name_or_path + ".json");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    std::vector<std::string> known;
    for (const auto& file : list_files((std::filesystem::path(data_dir) / "matrices").string(), ".json")) {
      known.push_back(std::filesystem::path(file).stem().string());
    }
    throw usage_error(fmt::format("unknown matrix '{}'; known: {}", name_or_path, join(known, ", ")));
  }
  return path.string();
}

}  // namespace gpucap::bench
