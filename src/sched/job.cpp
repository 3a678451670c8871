#include "gpucap/sched/job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::sched {
namespace {

Error job_error(std::string_view text, const std::string& what) {
  return usage_error(fmt::format("--job '{}': {}", text, what));
}

int positive_int(std::string_view text, std::string_view key, std::string_view value, long long max) {
  const auto n = parse_integer(value);
  if (!n || *n < 1 || *n > max) throw job_error(text, fmt::format("{}={} must be a whole number in [1, {}]", key, value, max));
  return static_cast<int>(*n);
}

double non_negative(std::string_view text, std::string_view key, std::string_view value, bool zero_allowed) {
  const auto x = parse_double(value);
  if (!x || !std::isfinite(*x) || *x < 0.0 || (!zero_allowed && *x == 0.0)) {
    throw job_error(text, fmt::format("{}={} must be a number {} 0", key, value, zero_allowed ? ">=" : ">"));
  }
  return *x;
}

int parse_priority(std::string_view text, std::string_view value) {
  if (value == "high") return priority_high;
  if (value == "low") return priority_low;
  return positive_int(text, "priority", value, 100);
}

Mode parse_mode(std::string_view text, std::string_view value) {
  if (value == "train" || value == "training") return Mode::training;
  if (value == "infer" || value == "inference") return Mode::inference;
  throw job_error(text, fmt::format("mode '{}' is neither train nor infer", value));
}

void apply_option(JobSpec& job, std::string_view text, std::string_view option) {
  const auto eq = option.find('=');
  if (eq == std::string_view::npos) throw job_error(text, fmt::format("'{}' is not KEY=VALUE", option));
  const auto key = option.substr(0, eq);
  const auto value = option.substr(eq + 1);
  if (key == "batch") {
    job.batch_size = positive_int(text, key, value, 65536);
  } else if (key == "priority") {
    job.priority = parse_priority(text, value);
  } else if (key == "steps") {
    job.steps = positive_int(text, key, value, 100'000'000);
  } else if (key == "requests") {
    job.requests = positive_int(text, key, value, 100'000'000);
  } else if (key == "duration") {
    job.duration_s = non_negative(text, key, value, false);
  } else if (key == "until") {
    if (value.empty()) throw job_error(text, "until= needs the name of another job");
    job.until = std::string(value);
  } else if (key == "warmup") {
    const auto n = parse_integer(value);
    if (!n || *n < 0 || *n > 1'000'000) throw job_error(text, fmt::format("warmup={} must be a whole number in [0, 1000000]", value));
    job.warmup = static_cast<int>(*n);
  } else if (key == "start") {
    job.start_s = non_negative(text, key, value, true);
  } else if (key == "reuse") {
    if (value.empty()) throw job_error(text, "reuse= needs a group name");
    job.reuse_input = std::string(value);
  } else if (key == "input") {
    if (value != "synthetic" && value != "jpeg") throw job_error(text, fmt::format("input={} is neither synthetic nor jpeg", value));
    job.jpeg_input = value == "jpeg";
  } else if (key == "rate") {
    job.rate_per_s = non_negative(text, key, value, false);
  } else if (key == "slo_ms") {
    job.slo_ms = non_negative(text, key, value, false);
  } else {
    throw job_error(text, fmt::format("unknown key '{}' (batch, priority, steps, requests, duration, until, start, warmup, rate, slo_ms, input, reuse)", key));
  }
}

// Jobs whose until= lead back to themselves would each wait for the next to end: none ever would
// (they ran until --max-time). Every job has at most one until=, so following them from each job
// either ends at a job with its own length or comes back to a job already on the path.
void check_until_cycles(const std::vector<JobSpec>& jobs) {
  std::map<std::string, const JobSpec*> by_name;
  for (const auto& job : jobs) by_name.emplace(job.name, &job);
  for (const auto& first : jobs) {
    std::vector<std::string> path;
    for (const JobSpec* job = &first; job != nullptr && job->until;) {
      const auto seen = std::find(path.begin(), path.end(), job->name);
      if (seen != path.end()) {
        std::vector<std::string> cycle(seen, path.end());
        cycle.push_back(job->name);
        throw usage_error(fmt::format("jobs {} wait for each other (until=): none of them would ever end; give one of them "
                                      "steps=, requests= or duration=",
                                      join(cycle, " -> ")));
      }
      path.push_back(job->name);
      const auto next = by_name.find(*job->until);
      job = next != by_name.end() ? next->second : nullptr;
    }
  }
}

}  // namespace

const char* to_string(Mode mode) { return mode == Mode::training ? "train" : "infer"; }

JobSpec parse_job_spec(std::string_view text, int default_steps) {
  JobSpec job;
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) throw job_error(text, "expected NAME=MODE:MODEL[:KEY=VALUE...]");
  job.name = std::string(text.substr(0, eq));
  const auto parts = split(text.substr(eq + 1), ':');
  if (parts.size() < 2 || parts[1].empty()) throw job_error(text, "expected NAME=MODE:MODEL[:KEY=VALUE...]");
  job.mode = parse_mode(text, parts[0]);
  job.model = std::string(parts[1]);
  for (std::size_t i = 2; i < parts.size(); ++i) apply_option(job, text, parts[i]);
  const int lengths = (job.steps ? 1 : 0) + (job.requests ? 1 : 0) + (job.duration_s ? 1 : 0) + (job.until ? 1 : 0);
  if (lengths > 1) throw job_error(text, "give one of steps=, requests=, duration= and until=, not several");
  if (job.requests && job.mode == Mode::training) throw job_error(text, "a training job runs steps=, not requests=");
  if (job.slo_ms && job.mode == Mode::training) throw job_error(text, "slo_ms= is for inference jobs");
  if (job.rate_per_s && job.mode == Mode::training) throw job_error(text, "rate= is for inference jobs");
  if (lengths == 0) {
    if (job.mode == Mode::training) {
      job.steps = default_steps;
    } else {
      job.requests = default_steps;
    }
  }
  if (job.steps && job.mode == Mode::inference) {
    job.requests = job.steps;  // an inference step is one request
    job.steps.reset();
  }
  return job;
}

void check_jobs(const std::vector<JobSpec>& jobs) {
  if (jobs.empty()) throw usage_error("give at least one --job");
  std::set<std::string> names;
  for (const auto& job : jobs) {
    if (!names.insert(job.name).second) throw usage_error(fmt::format("two jobs are named '{}'", job.name));
  }
  for (const auto& job : jobs) {
    if (job.until && (*job.until == job.name || !names.contains(*job.until))) {
      throw usage_error(fmt::format("job {}: until={} names no other job", job.name, *job.until));
    }
    const auto length = job.steps ? job.steps : job.requests;
    if (length && job.warmup >= *length) {
      throw usage_error(fmt::format("job {}: warmup={} leaves none of its {} steps to measure", job.name, job.warmup, *length));
    }
  }
  check_until_cycles(jobs);
  // A reuse group runs one input pipeline per batch for all its members: one batch size.
  std::map<std::string, const JobSpec*> first_of_group;
  for (const auto& job : jobs) {
    if (!job.reuse_input) continue;
    const auto [it, inserted] = first_of_group.emplace(*job.reuse_input, &job);
    if (!inserted && it->second->batch_size != job.batch_size) {
      throw usage_error(fmt::format("jobs {} and {} share reuse={} but not their batch size ({} and {})", it->second->name, job.name,
                                    *job.reuse_input, it->second->batch_size, job.batch_size));
    }
  }
}

std::string to_spec_string(const JobSpec& job) {
  std::string text = fmt::format("{}={}:{}:batch={}:priority={}", job.name, to_string(job.mode), job.model, job.batch_size,
                                 job.priority == priority_high  ? std::string("high")
                                 : job.priority == priority_low ? std::string("low")
                                                                : std::to_string(job.priority));
  if (job.steps) text += fmt::format(":steps={}", *job.steps);
  if (job.requests) text += fmt::format(":requests={}", *job.requests);
  if (job.duration_s) text += fmt::format(":duration={}", *job.duration_s);
  if (job.until) text += fmt::format(":until={}", *job.until);
  if (job.start_s > 0.0) text += fmt::format(":start={}", job.start_s);
  if (job.warmup > 0) text += fmt::format(":warmup={}", job.warmup);
  if (job.rate_per_s) text += fmt::format(":rate={}", *job.rate_per_s);
  if (job.jpeg_input) text += ":input=jpeg";
  if (job.reuse_input) text += fmt::format(":reuse={}", *job.reuse_input);
  if (job.slo_ms) text += fmt::format(":slo_ms={}", *job.slo_ms);
  return text;
}

}  // namespace gpucap::sched
