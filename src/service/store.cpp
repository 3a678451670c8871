#include "gpucap/service/store.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"

namespace gpucap::service {

Durability parse_durability(std::string_view text) {
  if (text == "full") return Durability::full;
  if (text == "normal") return Durability::normal;
  throw usage_error(fmt::format("--durability '{}': expected full or normal", text));
}

const char* to_string(Durability durability) { return durability == Durability::full ? "full" : "normal"; }

std::unique_ptr<Store> open_store(const std::string& url, Durability durability) {
  if (url.starts_with("sqlite:")) {
    const auto path = url.substr(7);
    if (path.empty()) throw usage_error("--db sqlite:PATH needs a path");
    return open_sqlite_store(path, durability);
  }
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) return open_postgres_store(url, durability);
  throw usage_error(fmt::format("--db '{}': expected sqlite:PATH or a PostgreSQL URI postgresql://USER@HOST:PORT/DB", url));
}

JobChanges diff_jobs(const bso::JobState& before, const bso::JobState& after) {
  if (after.trials.size() < before.trials.size()) {
    throw Error(ErrorCode::internal, fmt::format("an operation dropped trials of job {}", before.spec.job_id));
  }
  JobChanges changes;
  changes.fields_changed = fields_to_text(before) != fields_to_text(after);
  for (std::size_t i = 0; i < after.trials.size(); ++i) {
    const auto& trial = after.trials[i];
    if (trial.trial_number != static_cast<int>(i) + 1) {
      throw Error(ErrorCode::internal, fmt::format("trial {} of job {} is out of place", trial.trial_number, after.spec.job_id));
    }
    if (i >= before.trials.size()) {
      changes.inserted.push_back(&trial);
    } else if (trial != before.trials[i]) {
      changes.updated.push_back(&trial);
    }
  }
  return changes;
}

std::string spec_to_text(const bso::JobSpec& spec) { return bso::to_json(spec).dump(); }

bso::JobSpec spec_from_text(const std::string& text) {
  try {
    auto spec = bso::job_spec_from_json(nlohmann::json::parse(text));
    return spec;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::invalid_data, fmt::format("stored job spec: {}", e.what()));
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_data, fmt::format("stored job spec: {}", e.what()));
  }
}

std::string fields_to_text(const bso::JobState& job) { return bso::job_fields_to_json(job).dump(); }

void fields_from_text(const std::string& text, bso::JobState& job) {
  nlohmann::json fields;
  try {
    fields = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::invalid_data, fmt::format("stored job state of {}: {}", job.spec.job_id, e.what()));
  }
  bso::job_fields_from_json(fields, job);
}

bso::JobState job_from_text(const std::string& spec, const std::string& fields) {
  bso::JobState job;
  job.spec = spec_from_text(spec);
  fields_from_text(fields, job);
  return job;
}

void append_stored_trial(bso::JobState& job, const bso::Trial& trial) {
  if (trial.trial_number != static_cast<int>(job.trials.size()) + 1) {
    throw Error(ErrorCode::invalid_data, fmt::format("stored trials of job {}: trial {} follows trial {}", job.spec.job_id,
                                                     trial.trial_number, job.trials.size()));
  }
  job.trials.push_back(trial);
}

}  // namespace gpucap::service
