#include "gpucap/cluster/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <ctime>

#include "gpucap/cluster/agent.hpp"
#include "gpucap/cluster/coordinator.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/cluster/store.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/parallel.hpp"
#include "sim_scenario.hpp"

namespace gpucap::cluster {

namespace {

using detail::Scenario;

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr const char* kCluster = "sim";

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One policy's whole run: a store, a coordinator, an agent per node, the scenario's events.
class PolicySim {
 public:
  PolicySim(const Scenario& scenario, const SimulateOptions& options, Policy policy, LogFn log)
      : s_(scenario), o_(options), policy_(policy), log_(std::move(log)), nodes_(scenario.nodes.size()) {}

  PolicyRun run();

 private:
  enum class Kind { wake_node, wake_coordinator, store_tick, join, leave, die, partition_start, partition_end,
                    publish, broken_start, broken_end, announce, enforce, sample };
  struct Event {
    double t_s;
    std::uint64_t seq;
    Kind kind;
    std::size_t index;
    double value;
    bool operator>(const Event& other) const { return t_s != other.t_s ? t_s > other.t_s : seq > other.seq; }
  };
  struct Node {
    std::unique_ptr<Store> client;
    std::unique_ptr<NodeAgent> agent;
    std::int64_t cap_mw = 0;
    bool alive = false;
    bool broken = false;
    double requested_s = kNever;  // the wake its agent last asked for
    double last_step_s = -1.0;
  };

  void push(double t_s, Kind kind, std::size_t index = 0, double value = 0.0) {
    queue_.push({t_s, seq_++, kind, index, value});
  }
  // Every wake is its own event — a watch delivery, or the time a step asked for — so that a
  // delivery due after a pending wake is not lost until the next keep-alive. A party steps at most
  // once per instant; a step's request that did not change is not queued again.
  void wake_node(std::size_t i, double t_s) { push(std::max(t_s, now_), Kind::wake_node, i); }
  void wake_coordinator(double t_s) { push(std::max(t_s, now_), Kind::wake_coordinator); }
  void request_wake(double next_s, double& requested_s, Kind kind, std::size_t index) {
    if (!std::isfinite(next_s) || next_s == requested_s) return;
    requested_s = next_s;
    push(std::max(next_s, now_ + 1e-6), kind, index);
  }
  void set_cap(std::size_t i, double cap_w);
  void check_budget();
  void handle(const Event& e);
  void join(std::size_t i);
  void sample();
  [[nodiscard]] NodeCurve published_curve(std::size_t i) const;

  const Scenario& s_;
  const SimulateOptions& o_;
  Policy policy_;
  LogFn log_;
  MemoryStore store_{0.0, 20'000};
  std::unique_ptr<Store> facility_;
  std::unique_ptr<Store> coordinator_client_;
  std::unique_ptr<Coordinator> coordinator_;
  double coordinator_requested_s_ = kNever;
  double coordinator_last_step_s_ = -1.0;
  double store_tick_s_ = kNever;
  std::vector<Node> nodes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  double now_ = 0.0;
  std::int64_t sum_mw_ = 0;
  std::int64_t enforced_mw_ = 0;
  bool over_ = false;
  double over_since_s_ = 0.0;
  double last_violation_s_ = -1.0;
  PolicyRun result_;
  std::vector<double> realloc_s_;
  double value_sum_ = 0.0;
  double rps_sum_ = 0.0;
  std::size_t samples_ = 0;
};

NodeCurve PolicySim::published_curve(std::size_t i) const {
  const auto& spec = s_.nodes[i];
  auto curve = detail::node_curve(s_.pairs[spec.pair], s_.unit_rps[spec.pair], spec.demand_at(now_));
  if (nodes_[i].broken) curve.points[curve.points.size() / 2].throughput = std::numeric_limits<double>::quiet_NaN();
  return curve;
}

void PolicySim::set_cap(std::size_t i, double cap_w) {
  const auto mw = static_cast<std::int64_t>(std::llround(cap_w * 1000.0));
  sum_mw_ += mw - nodes_[i].cap_mw;
  nodes_[i].cap_mw = mw;
  check_budget();
}

void PolicySim::check_budget() {
  const bool over = sum_mw_ > enforced_mw_;
  if (over) {
    if (!over_) over_since_s_ = now_;
    if (now_ != last_violation_s_) ++result_.budget_violations;
    last_violation_s_ = now_;
    result_.max_over_budget_w = std::max(result_.max_over_budget_w, static_cast<double>(sum_mw_ - enforced_mw_) / 1000.0);
  } else if (over_) {
    result_.seconds_over_budget += now_ - over_since_s_;
  }
  over_ = over;
}

void PolicySim::join(std::size_t i) {
  const auto& spec = s_.nodes[i];
  auto& node = nodes_[i];
  node.client = store_.connect({spec.watch_delay_s, 2 + i});
  AgentOptions options;
  options.cluster = kCluster;
  options.node_id = spec.id;
  options.timing = o_.timing;
  options.safe_cap_w = s_.pairs[spec.pair].min_cap_w;
  options.apply_latency_s = spec.apply_s;
  options.gpu = s_.pairs[spec.pair].gpu;
  options.model = s_.pairs[spec.pair].model;
  options.log = log_;
  node.agent = std::make_unique<NodeAgent>(*node.client, options, [this, i](double cap) { set_cap(i, cap); }, 0.0, now_);
  node.alive = true;
  node.agent->set_curve(published_curve(i));
  wake_node(i, now_);
}

void PolicySim::sample() {
  double value = 0.0;
  double rps = 0.0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].alive || nodes_[i].cap_mw <= 0) continue;
    const auto& spec = s_.nodes[i];
    const auto& pair = s_.pairs[spec.pair];
    const double v = detail::node_value(pair, s_.unit_rps[spec.pair], spec.demand_at(now_),
                                        static_cast<double>(nodes_[i].cap_mw) / 1000.0);
    value += v;
    rps += v * s_.unit_rps[spec.pair];
  }
  value_sum_ += value;
  rps_sum_ += rps;
  ++samples_;
  if (o_.timeline) {
    result_.timeline.push_back({now_, value, static_cast<double>(sum_mw_) / 1000.0, static_cast<double>(enforced_mw_) / 1000.0});
  }
}

void PolicySim::handle(const Event& e) {
  switch (e.kind) {
    case Kind::wake_node: {
      auto& node = nodes_[e.index];
      if (!node.alive || e.t_s == node.last_step_s) return;
      node.last_step_s = e.t_s;
      request_wake(node.agent->step(now_), node.requested_s, Kind::wake_node, e.index);
      return;
    }
    case Kind::wake_coordinator: {
      if (e.t_s == coordinator_last_step_s_) return;
      coordinator_last_step_s_ = e.t_s;
      request_wake(coordinator_->step(now_), coordinator_requested_s_, Kind::wake_coordinator, 0);
      return;
    }
    case Kind::store_tick:
      if (e.t_s == store_tick_s_) store_tick_s_ = kNever;
      return;
    case Kind::join: join(e.index); return;
    case Kind::leave: {
      auto& node = nodes_[e.index];
      if (!node.alive) return;
      node.agent->leave(now_);
      node.alive = false;
      node.agent.reset();
      node.client.reset();
      return;
    }
    case Kind::die: {
      auto& node = nodes_[e.index];
      if (!node.alive) return;
      node.alive = false;
      set_cap(e.index, 0.0);  // the machine is off
      store_.set_connected(2 + e.index, false);
      node.agent.reset();
      node.client.reset();
      return;
    }
    case Kind::partition_start:
      if (nodes_[e.index].alive) store_.set_connected(2 + e.index, false);
      return;
    case Kind::partition_end:
      store_.set_connected(2 + e.index, true);
      if (nodes_[e.index].alive) wake_node(e.index, now_);
      return;
    case Kind::broken_start:
    case Kind::broken_end:
      nodes_[e.index].broken = e.kind == Kind::broken_start;
      [[fallthrough]];
    case Kind::publish:
      if (nodes_[e.index].alive) {
        nodes_[e.index].agent->set_curve(published_curve(e.index));
        wake_node(e.index, now_);
      }
      return;
    case Kind::announce:
      facility_->put(PutOp{Keys(kCluster).budget(), budget_json(e.value), 0});
      return;
    case Kind::enforce:
      enforced_mw_ = static_cast<std::int64_t>(std::floor(e.value * 1000.0));
      check_budget();
      return;
    case Kind::sample: sample(); return;
  }
}

PolicyRun PolicySim::run() {
  result_.policy = policy_;
  store_.set_delivery_hook([this](std::uint64_t tag, double at_s) {
    if (tag == 0) {
      wake_coordinator(at_s);
    } else if (tag >= 2) {
      const auto i = static_cast<std::size_t>(tag - 2);
      if (nodes_[i].alive) wake_node(i, at_s);
    }
  });
  facility_ = store_.connect({0.0, 1});
  coordinator_client_ = store_.connect({0.01, 0});
  CoordinatorOptions options;
  options.cluster = kCluster;
  options.policy = policy_;
  options.timing = o_.timing;
  options.period_s = o_.period_s;
  options.log = log_;
  coordinator_ = std::make_unique<Coordinator>(*coordinator_client_, options);
  coordinator_->on_settled([this](const std::string& id, double since_s, double now_s) {
    const auto i = static_cast<std::size_t>(std::stoul(id.substr(5)));
    const auto& partition = s_.nodes[i].partition;
    if (partition && partition->from_s <= now_s && partition->to_s >= since_s) return;  // had no contact
    realloc_s_.push_back(now_s - since_s);
  });
  enforced_mw_ = static_cast<std::int64_t>(std::floor(s_.budget_w * 1000.0));
  facility_->put(PutOp{Keys(kCluster).budget(), budget_json(s_.budget_w), 0});
  for (const auto& [at, watts] : s_.announcements) push(at, Kind::announce, 0, watts);
  for (const auto& [at, watts] : s_.enforcements) push(at, Kind::enforce, 0, watts);
  for (std::size_t i = 0; i < s_.nodes.size(); ++i) {
    const auto& spec = s_.nodes[i];
    push(spec.join_s, Kind::join, i);
    for (std::size_t k = 1; k < spec.demand.size(); ++k) push(spec.demand[k].first + o_.demand_detect_s, Kind::publish, i);
    if (spec.leave_s) push(*spec.leave_s, Kind::leave, i);
    if (spec.death_s) push(*spec.death_s, Kind::die, i);
    if (spec.partition) {
      push(spec.partition->from_s, Kind::partition_start, i);
      push(spec.partition->to_s, Kind::partition_end, i);
    }
    if (spec.broken) {
      push(spec.broken->from_s, Kind::broken_start, i);
      push(spec.broken->to_s, Kind::broken_end, i);
    }
  }
  for (double t = o_.warmup_s; t <= o_.duration_s + 1e-9; t += o_.sample_s) push(t, Kind::sample);
  wake_coordinator(0.0);
  while (!queue_.empty()) {
    const Event e = queue_.top();
    if (e.t_s > o_.duration_s) break;
    queue_.pop();
    now_ = e.t_s;
    store_.advance_to(now_);
    handle(e);
    if (const auto deadline = store_.next_lease_deadline(); deadline && *deadline < store_tick_s_) {
      store_tick_s_ = std::max(*deadline, now_);
      push(store_tick_s_, Kind::store_tick);
    }
  }
  now_ = o_.duration_s;
  if (over_) result_.seconds_over_budget += now_ - over_since_s_;
  const auto& stats = coordinator_->stats();
  result_.rounds = stats.rounds;
  result_.writes = stats.writes;
  result_.ignored = stats.ignored;
  result_.max_round_cpu_s = stats.max_round_cpu_s;
  for (const auto& node : nodes_) {
    if (node.agent) result_.refused_registrations += node.agent->refused_registrations();
  }
  if (samples_ > 0) {
    result_.throughput = value_sum_ / static_cast<double>(samples_);
    result_.requests_per_s = rps_sum_ / static_cast<double>(samples_);
  }
  std::sort(realloc_s_.begin(), realloc_s_.end());
  result_.realloc_samples = realloc_s_.size();
  if (!realloc_s_.empty()) {
    const auto at = [&](double q) {
      return realloc_s_[std::min(realloc_s_.size() - 1, static_cast<std::size_t>(q * static_cast<double>(realloc_s_.size())))];
    };
    result_.max_realloc_s = realloc_s_.back();
    result_.p50_realloc_s = at(0.5);
    result_.p99_realloc_s = at(0.99);
  }
  return result_;
}

// The offline optimum at every sample: the hull bound of the true curves of the live nodes under
// the budget in force.
std::vector<double> optimum_timeline(const Scenario& s, const SimulateOptions& o) {
  std::vector<double> values;
  std::vector<std::optional<PreparedCurve>> curves(s.nodes.size());
  std::vector<double> curve_demand(s.nodes.size(), -1.0);
  for (double t = o.warmup_s; t <= o.duration_s + 1e-9; t += o.sample_s) {
    std::vector<const PreparedCurve*> live;
    live.reserve(s.nodes.size());
    for (std::size_t i = 0; i < s.nodes.size(); ++i) {
      const auto& spec = s.nodes[i];
      if (!spec.alive_at(t)) continue;
      const double d = spec.demand_at(t);
      if (d != curve_demand[i]) {
        curves[i].emplace(detail::node_curve(s.pairs[spec.pair], s.unit_rps[spec.pair], d));
        curve_demand[i] = d;
      }
      live.push_back(&*curves[i]);
    }
    values.push_back(hull_upper_bound(s.budget_in_force(t), live));
  }
  return values;
}

}  // namespace

void validate(const SimulateOptions& o, const OptionNames& names) {
  const auto finite = [](double v) { return std::isfinite(v); };
  if (o.nodes < 1 || o.nodes > 100'000) throw usage_error(fmt::format("{} {} must be between 1 and 100000", names.nodes, o.nodes));
  if (!finite(o.budget) || o.budget <= 0.0) throw usage_error(fmt::format("{} {} must be positive", names.budget, o.budget));
  if (o.budget_fraction && o.budget > 2.0) {
    throw usage_error(fmt::format("{} {:g}% is absurd: at most 200% of the nodes' TDPs", names.budget, o.budget * 100.0));
  }
  if (!o.budget_fraction && o.budget > kMaxBudgetW) throw usage_error(fmt::format("{} {:g} W is absurd (at most {:g} W)", names.budget, o.budget, kMaxBudgetW));
  if (!finite(o.duration_s) || o.duration_s <= 0.0 || o.duration_s > 1e6) {
    throw usage_error(fmt::format("{} {:g} s must be in (0, 1e6]", names.duration, o.duration_s));
  }
  if (!finite(o.warmup_s) || o.warmup_s < 0.0 || o.warmup_s >= o.duration_s) {
    throw usage_error(fmt::format("warm-up {} s must be >= 0 and shorter than the run", o.warmup_s));
  }
  if (!finite(o.sample_s) || o.sample_s <= 0.0) throw usage_error(fmt::format("sample period {} s must be positive", o.sample_s));
  if (!finite(o.notice_s) || o.notice_s < 0.0) throw usage_error(fmt::format("notice {} s must be >= 0", o.notice_s));
  if (!finite(o.period_s) || o.period_s <= 0.0) throw usage_error(fmt::format("period {} s must be positive", o.period_s));
  o.timing.validate();
  double churn = 0.0;
  for (const double f : {o.join_fraction, o.leave_fraction, o.death_fraction, o.partition_fraction, o.broken_curve_fraction}) {
    if (!finite(f) || f < 0.0 || f > 1.0) throw usage_error(fmt::format("event fraction {} must be in [0, 1]", f));
  }
  churn = o.leave_fraction + o.death_fraction + o.partition_fraction + o.broken_curve_fraction;
  if (churn > 1.0) throw usage_error("leave, death, partition and broken-curve fractions must sum to at most 1");
  if (!finite(o.demand_min) || !finite(o.demand_max) || o.demand_min <= 0.0 || o.demand_max < o.demand_min ||
      o.demand_max > 100.0) {
    throw usage_error(fmt::format("{} {:g}-{:g} must satisfy 0 < MIN <= MAX <= 100", names.load, o.demand_min, o.demand_max));
  }
  if (!finite(o.demand_change_mean_s) || o.demand_change_mean_s <= 0.0 || !finite(o.demand_detect_s) ||
      o.demand_detect_s < 0.0) {
    throw usage_error("demand change interval must be positive and detection delay >= 0");
  }
  if (!(o.watch_delay_min_s >= 0.0 && o.watch_delay_max_s >= o.watch_delay_min_s && o.apply_min_s >= 0.0 &&
        o.apply_max_s >= o.apply_min_s && o.apply_max_s <= o.timing.max_apply_s)) {
    throw usage_error("watch delays and apply times must be ranges of >= 0 s, apply times within the timing's longest");
  }
  if (o.threads < 1 || o.threads > 64) throw usage_error(fmt::format("{} {} must be between 1 and 64", names.threads, o.threads));
  double last = -kNever;
  for (const auto& step : o.budget_steps) {
    if (!finite(step.at_s) || step.at_s <= 0.0 || step.at_s >= o.duration_s) {
      throw usage_error(fmt::format("{} at {:g} s must lie inside the run (0, {:g}) s", names.budget_step, step.at_s, o.duration_s));
    }
    if (step.at_s < last + o.notice_s || step.at_s <= last) {
      throw usage_error(fmt::format("{}: steps must be in time order and at least the notice ({:g} s) apart", names.budget_step, o.notice_s));
    }
    last = step.at_s;
    if (!finite(step.value) || step.value <= 0.0 || (step.fraction && step.value > 2.0) ||
        (!step.fraction && step.value > kMaxBudgetW)) {
      throw usage_error(fmt::format("budget step at {:g} s: {} is not a sensible budget", step.at_s, step.value));
    }
  }
}

const PolicyRun& SimulateReport::run(Policy policy) const {
  for (const auto& r : runs) {
    if (r.policy == policy) return r;
  }
  throw Error(ErrorCode::internal, fmt::format("no run of policy {}", to_string(policy)));
}

SimulateReport simulate(const sim::Catalog& catalog, const SimulateOptions& options,
                        const std::function<void(std::string_view)>& log) {
  const auto start = std::chrono::steady_clock::now();
  const Scenario scenario = detail::make_scenario(catalog, options);
  if (!options.budget_fraction && options.budget > 2.0 * scenario.sum_tdp_w) {
    throw usage_error(fmt::format("budget {:g} W is absurd: more than twice the nodes' TDPs ({:g} W)", options.budget,
                                  scenario.sum_tdp_w));
  }
  SimulateReport report;
  report.options = options;
  report.initial_nodes = scenario.initial;
  report.joined = scenario.nodes.size() - scenario.initial;
  for (const auto& n : scenario.nodes) {
    report.left += n.leave_s ? 1U : 0U;
    report.died += n.death_s ? 1U : 0U;
    report.partitioned += n.partition ? 1U : 0U;
    report.broken += n.broken ? 1U : 0U;
  }
  std::vector<bool> used(scenario.pairs.size(), false);
  for (const auto& n : scenario.nodes) used[n.pair] = true;
  report.pairs = static_cast<std::size_t>(std::count(used.begin(), used.end(), true));
  report.sum_tdp_w = scenario.sum_tdp_w;
  report.budget_w = scenario.budget_w;

  // Tasks: every policy, and the optimum; `threads` at a time.
  const auto& policies = all_policies();
  report.runs.resize(policies.size());
  std::mutex log_mutex;
  const LogFn safe_log = [&](std::string_view line) {
    if (!log) return;
    const std::lock_guard lock(log_mutex);
    log(line);
  };
  // The policies first (gpucap and the balancer are the heaviest), the optimum last: on two
  // threads the longest tasks start first and the short one fills the gap.
  std::vector<std::function<void()>> tasks;
  const std::vector<std::size_t> heaviest_first = {0, 3, 2, 1};  // gpucap, balancer, tdp, equal
  for (const std::size_t k : heaviest_first) {
    tasks.emplace_back([&, k] {
      const double cpu0 = thread_cpu_s();
      // Only the headline policy's log lines reach the caller: the others repeat them.
      PolicySim sim(scenario, options, policies[k], policies[k] == options.policy ? safe_log : LogFn([](std::string_view) {}));
      report.runs[k] = sim.run();
      report.runs[k].cpu_s = thread_cpu_s() - cpu0;
    });
  }
  tasks.emplace_back([&] {
    const double cpu0 = thread_cpu_s();
    report.optimum_timeline = optimum_timeline(scenario, options);
    report.optimum_cpu_s = thread_cpu_s() - cpu0;
  });
  parallel_for(tasks.size(), options.threads, [&tasks](std::size_t k) { tasks[k](); });
  double sum = 0.0;
  for (const double v : report.optimum_timeline) sum += v;
  report.optimum = report.optimum_timeline.empty() ? 0.0 : sum / static_cast<double>(report.optimum_timeline.size());
  if (!options.timeline) report.optimum_timeline.clear();
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

nlohmann::json to_json(const SimulateReport& r) {
  const auto& headline = r.run(r.options.policy);
  const auto ratio = [](double a, double b) { return b > 0.0 ? a / b : 0.0; };
  nlohmann::json policies = nlohmann::json::object();
  double max_cpu = 0.0;
  nlohmann::json host = {{"wall_s", r.wall_s}, {"threads", r.options.threads}, {"optimum_cpu_s", r.optimum_cpu_s}};
  for (const auto& run : r.runs) {
    max_cpu = std::max(max_cpu, run.max_round_cpu_s);
    host[fmt::format("{}_cpu_s", to_string(run.policy))] = run.cpu_s;
    policies[std::string(to_string(run.policy))] = {
        {"throughput", run.throughput},
        {"requests_per_s", run.requests_per_s},
        {"ratio_to_equal_split", ratio(run.throughput, r.run(Policy::equal).throughput)},
        {"ratio_to_optimum", ratio(run.throughput, r.optimum)},
        {"budget_violations", run.budget_violations},
        {"seconds_over_budget", run.seconds_over_budget},
        {"max_over_budget_w", run.max_over_budget_w},
        {"max_realloc_s", run.max_realloc_s},
        {"p50_realloc_s", run.p50_realloc_s},
        {"p99_realloc_s", run.p99_realloc_s},
        {"realloc_samples", run.realloc_samples},
        {"rounds", run.rounds},
        {"allocation_writes", run.writes},
        {"ignored_inputs", run.ignored},
        {"refused_registrations", run.refused_registrations}};
  }
  host["max_round_cpu_ms"] = max_cpu * 1000.0;
  return {
      {"platform", "simulated"},
      {"policy", std::string(to_string(r.options.policy))},
      {"nodes", r.initial_nodes},
      {"throughput", headline.throughput},
      {"throughput_unit", "TDP-equivalents: each node's good requests/s over its model's unit (the geometric mean over GPUs of the model's capacity at TDP), summed"},
      {"requests_per_s", headline.requests_per_s},
      {"baselines",
       {{"equal_split", r.run(Policy::equal).throughput},
        {"tdp_proportional", r.run(Policy::tdp).throughput},
        {"power_balancer", r.run(Policy::balancer).throughput},
        {"optimum", r.optimum}}},
      {"optimum_kind", "upper bound: the concave hulls' water-filling of the true curves at each sample, no delays"},
      {"ratio_to_equal_split", ratio(headline.throughput, r.run(Policy::equal).throughput)},
      {"ratio_to_optimum", ratio(headline.throughput, r.optimum)},
      {"budget_violations", headline.budget_violations},
      {"seconds_over_budget", headline.seconds_over_budget},
      {"max_realloc_s", headline.max_realloc_s},
      {"p99_realloc_s", headline.p99_realloc_s},
      {"budget_w", r.budget_w},
      {"sum_tdp_w", r.sum_tdp_w},
      {"events",
       {{"joined", r.joined}, {"left", r.left}, {"died", r.died}, {"partitioned", r.partitioned},
        {"broken_curves", r.broken}}},
      {"pairs", r.pairs},
      {"seed", r.options.seed},
      {"duration_s", r.options.duration_s},
      {"policies", policies},
      {"host", host}};
}

}  // namespace gpucap::cluster
