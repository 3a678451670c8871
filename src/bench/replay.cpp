#include "gpucap/bench/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "gpucap/control/batchdvfs.hpp"
#include "gpucap/control/clipper.hpp"
#include "gpucap/control/dvfs.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::bench {

namespace {

int clock_index(const P40Log& log, const P40LogRow& row, const std::vector<double>& levels) {
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (std::abs(levels[i] - *row.clock_mhz) < 0.5) return static_cast<int>(i);
  }
  throw data_error(log.path, row.line, fmt::format("DVFS {:g} MHz is not one of the controller's clock levels",
                                                   *row.clock_mhz));
}

void check_index(const P40Log& log, const P40LogRow& row, int index, int top, std::string_view name) {
  if (index > top) {
    throw data_error(log.path, row.line, fmt::format("{} {} is beyond the batch set (0..{})", name, index, top));
  }
}

// Adapters: how each algorithm's state is read from a row, stepped, and shown.
struct BatchDvfsAdapter {
  using State = control::BatchDvfsState;
  control::BatchDvfsParams params;

  State logged(const P40Log& log, const P40LogRow& row) const {
    const int top = static_cast<int>(params.batch_sizes.size()) - 1;
    check_index(log, row, *row.min_index, top, "minBS");
    check_index(log, row, *row.max_index, top, "maxBS");
    check_index(log, row, *row.best_index, top, "BestBS");
    return State{{*row.min_index, *row.max_index, *row.best_index}, clock_index(log, row, params.clock_levels_mhz)};
  }
  State step(const State& s, double power_w, double cap_w) const {
    return control::batchdvfs_step(params, s, power_w, cap_w);
  }
  int batch(const State& s) const { return params.batch_sizes[static_cast<std::size_t>(s.search.cur)]; }
  std::optional<double> clock(const State& s) const {
    return params.clock_levels_mhz[static_cast<std::size_t>(s.clock_index)];
  }
  nlohmann::json json(const State& s) const {
    return {{"minBS", s.search.lo}, {"maxBS", s.search.hi}, {"BestBS", s.search.cur}, {"clock_index", s.clock_index}};
  }
};

struct ClipperAdapter {
  using State = control::ClipperState;
  control::ClipperParams params;

  State logged(const P40Log& log, const P40LogRow& row) const {
    check_index(log, row, *row.best_index, static_cast<int>(params.batch_sizes.size()) - 1, "BestBS");
    return State{*row.best_index};
  }
  State step(const State& s, double power_w, double cap_w) const {
    return control::clipper_step(params, s, power_w, cap_w);
  }
  int batch(const State& s) const { return params.batch_sizes[static_cast<std::size_t>(s.index)]; }
  std::optional<double> clock(const State& /*s*/) const { return std::nullopt; }
  nlohmann::json json(const State& s) const { return {{"BestBS", s.index}}; }
};

struct DvfsAdapter {
  using State = control::DvfsState;
  control::DvfsParams params;

  State logged(const P40Log& log, const P40LogRow& row) const {
    return State{clock_index(log, row, params.clock_levels_mhz)};
  }
  State step(const State& s, double power_w, double cap_w) const {
    return control::dvfs_step(params, s, power_w, cap_w);
  }
  int batch(const State& /*s*/) const { return params.batch_size; }
  std::optional<double> clock(const State& s) const {
    return params.clock_levels_mhz[static_cast<std::size_t>(s.clock_index)];
  }
  nlohmann::json json(const State& s) const { return {{"clock_index", s.clock_index}}; }
};

template <typename State>
Mismatch classify(const State& before, const State& predicted, const State& logged, bool due, bool in_band) {
  if (predicted == logged) return Mismatch::none;
  if (logged == before) return Mismatch::log_held;
  if (predicted == before) return due ? (in_band ? Mismatch::log_changed_in_band : Mismatch::different_change)
                                      : Mismatch::log_changed_no_window;
  return Mismatch::different_change;
}

template <typename Adapter>
ReplayResult replay_with(const P40Log& log, const Adapter& adapter, const ReplayOptions& options) {
  ReplayResult result;
  result.path = log.path;
  result.kind = log.kind;
  result.options = options;
  const auto& rows = log.rows;

  // Images left before each row, so the dataset's last (truncated) batch is predicted exactly.
  long long images_left = 0;
  for (const auto& row : rows) images_left += row.batch_size;
  images_left -= rows.front().batch_size;

  auto state = adapter.logged(log, rows.front());
  // Upstream's first step includes graph loading and lasts longer than the window, so the first
  // logged row always closes a window.
  double last_decision_s = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    const auto& row = rows[i];
    const auto& next = rows[i + 1];
    const bool due = row.time_s - last_decision_s > options.window_s;
    const auto predicted = due ? adapter.step(state, row.power_w, row.cap_w) : state;
    const auto logged = adapter.logged(log, next);

    ReplayStep step;
    step.step = i + 1;
    step.line = next.line;
    step.time_s = row.time_s - rows.front().time_s;
    step.power_w = row.power_w;
    step.cap_w = row.cap_w;
    step.decided = due;
    step.logged_batch = next.batch_size;
    step.batch = static_cast<int>(std::min<long long>(adapter.batch(predicted), images_left));
    step.logged_clock_mhz = next.clock_mhz;
    step.clock_mhz = adapter.clock(predicted);
    step.logged_state = adapter.json(logged);
    step.state = adapter.json(predicted);
    step.match = predicted == logged && step.batch == step.logged_batch;
    if (!step.match) {
      const bool in_band =
          control::classify_power(row.power_w, row.cap_w, options.alpha) == control::PowerBand::inside;
      step.mismatch = classify(state, predicted, logged, due, in_band);
      // Same state but another batch: the dataset's last batch was not where we expected it.
      if (step.mismatch == Mismatch::none) step.mismatch = Mismatch::different_change;
    }
    images_left -= next.batch_size;

    if (step.match) {
      if (due) last_decision_s = row.time_s;
      state = predicted;
      ++result.matched;
    } else {
      // Re-synchronise: the log's state, and a decision at this step if we expected one or the
      // logged state changed (a decision we did not expect).
      if (due || !(logged == state)) last_decision_s = row.time_s;
      state = logged;
    }
    result.steps.push_back(std::move(step));
  }
  return result;
}

}  // namespace

const char* to_string(Mismatch mismatch) {
  switch (mismatch) {
    case Mismatch::none: return "";
    case Mismatch::log_held: return "log_held";
    case Mismatch::log_changed_no_window: return "log_changed_no_window";
    case Mismatch::log_changed_in_band: return "log_changed_in_band";
    case Mismatch::different_change: return "different_change";
  }
  return "?";
}

std::size_t ReplayResult::count(Mismatch mismatch) const {
  return static_cast<std::size_t>(
      std::count_if(steps.begin(), steps.end(), [mismatch](const ReplayStep& s) { return s.mismatch == mismatch; }));
}

ReplayResult replay_p40_log(const P40Log& log, const ReplayOptions& options) {
  if (!(options.alpha > 0.0 && options.alpha <= 1.0)) {
    throw usage_error(fmt::format("--alpha {:g} must be in (0, 1]", options.alpha));
  }
  if (!(options.window_s > 0.0 && options.window_s <= control::kMaxWindowS)) {
    throw usage_error(fmt::format("--window {:g} must be > 0 and at most {:g} s", options.window_s, control::kMaxWindowS));
  }
  if (!options.clock_levels_mhz.empty()) {
    if (log.kind == P40LogKind::clipper) throw usage_error("--clock-levels does not apply to clipper (no DVFS)");
    for (std::size_t i = 1; i < options.clock_levels_mhz.size(); ++i) {
      if (options.clock_levels_mhz[i] <= options.clock_levels_mhz[i - 1]) {
        throw usage_error("--clock-levels must be strictly increasing");
      }
    }
  }
  if (log.rows.size() < 2) throw data_error(log.path, 0, "replay needs at least two data rows");
  const auto levels = options.clock_levels_mhz.empty() ? control::seed_p40_clock_levels_mhz() : options.clock_levels_mhz;
  const auto period = control::DecisionPeriod::every_seconds(options.window_s);
  switch (log.kind) {
    case P40LogKind::batchdvfs: {
      BatchDvfsAdapter adapter;
      adapter.params.alpha = options.alpha;
      adapter.params.period = period;
      adapter.params.clock_levels_mhz = levels;
      return replay_with(log, adapter, options);
    }
    case P40LogKind::clipper: {
      ClipperAdapter adapter;
      adapter.params.alpha = options.alpha;
      adapter.params.period = period;
      return replay_with(log, adapter, options);
    }
    case P40LogKind::dvfs: {
      DvfsAdapter adapter;
      adapter.params.alpha = options.alpha;
      adapter.params.period = period;
      adapter.params.clock_levels_mhz = levels;
      // The fixed batch is whatever the run used (256 in the published logs).
      adapter.params.batch_size = log.rows.front().batch_size;
      return replay_with(log, adapter, options);
    }
  }
  throw Error(ErrorCode::internal, "replay: unknown log kind");
}

namespace {
nlohmann::json mismatch_counts(const ReplayResult& result) {
  return {{"log_held", result.count(Mismatch::log_held)},
          {"log_changed_no_window", result.count(Mismatch::log_changed_no_window)},
          {"log_changed_in_band", result.count(Mismatch::log_changed_in_band)},
          {"different_change", result.count(Mismatch::different_change)}};
}

std::string optional_mhz(const std::optional<double>& mhz) { return mhz ? fmt::format("{:g}", *mhz) : std::string(); }
}  // namespace

std::string replay_csv(const ReplayResult& result) {
  std::string out = "step,time_s,power_w,cap_w,logged_batch,batch,logged_clock_mhz,clock_mhz,match\n";
  for (const auto& s : result.steps) {
    out += fmt::format("{},{:.2f},{:g},{:g},{},{},{},{},{}\n", s.step, s.time_s, s.power_w, s.cap_w, s.logged_batch,
                       s.batch, optional_mhz(s.logged_clock_mhz), optional_mhz(s.clock_mhz), s.match ? 1 : 0);
  }
  out += fmt::format("match {:.2f}% ({}/{})\n", result.match_pct(), result.matched, result.steps.size());
  return out;
}

nlohmann::json replay_json(const ReplayResult& result) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : result.steps) {
    nlohmann::json step = {{"step", s.step},
                           {"line", s.line},
                           {"time_s", s.time_s},
                           {"power_w", s.power_w},
                           {"cap_w", s.cap_w},
                           {"decided", s.decided},
                           {"logged_batch", s.logged_batch},
                           {"batch", s.batch},
                           {"logged_clock_mhz", s.logged_clock_mhz ? nlohmann::json(*s.logged_clock_mhz) : nullptr},
                           {"clock_mhz", s.clock_mhz ? nlohmann::json(*s.clock_mhz) : nullptr},
                           {"logged_state", s.logged_state},
                           {"state", s.state},
                           {"match", s.match},
                           {"mismatch", to_string(s.mismatch)}};
    steps.push_back(std::move(step));
  }
  return {{"file", result.path},
          {"algorithm", to_string(result.kind)},
          {"alpha", result.options.alpha},
          {"window_s", result.options.window_s},
          {"steps", std::move(steps)},
          {"matched", result.matched},
          {"total", result.steps.size()},
          {"match_pct", result.match_pct()},
          {"mismatches", mismatch_counts(result)}};
}

namespace {
constexpr Mismatch kMismatchClasses[] = {Mismatch::log_held, Mismatch::log_changed_no_window,
                                         Mismatch::log_changed_in_band, Mismatch::different_change};

std::pair<std::size_t, std::size_t> pooled(const std::vector<ReplayResult>& results) {
  std::size_t matched = 0, steps = 0;
  for (const auto& r : results) {
    matched += r.matched;
    steps += r.steps.size();
  }
  return {matched, steps};
}
}  // namespace

std::string replay_table_csv(const std::vector<ReplayResult>& results) {
  std::string out = "file,algorithm,steps,matched,match_pct";
  for (const auto m : kMismatchClasses) out += fmt::format(",{}", to_string(m));
  out += "\n";
  for (const auto& r : results) {
    out += fmt::format("{},{},{},{},{:.2f}", std::filesystem::path(r.path).filename().string(), to_string(r.kind),
                       r.steps.size(), r.matched, r.match_pct());
    for (const auto m : kMismatchClasses) out += fmt::format(",{}", r.count(m));
    out += "\n";
  }
  const auto [matched, steps] = pooled(results);
  const double pct = steps == 0 ? 0.0 : 100.0 * static_cast<double>(matched) / static_cast<double>(steps);
  out += fmt::format("match {:.2f}% ({}/{})\n", pct, matched, steps);
  return out;
}

nlohmann::json replay_table_json(const std::vector<ReplayResult>& results) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& r : results) {
    files.push_back({{"file", r.path},
                     {"algorithm", to_string(r.kind)},
                     {"steps", r.steps.size()},
                     {"matched", r.matched},
                     {"match_pct", r.match_pct()},
                     {"mismatches", mismatch_counts(r)}});
  }
  const auto [matched, steps] = pooled(results);
  return {{"files", std::move(files)},
          {"matched", matched},
          {"total", steps},
          {"match_pct", steps == 0 ? 0.0 : 100.0 * static_cast<double>(matched) / static_cast<double>(steps)}};
}

}  // namespace gpucap::bench
