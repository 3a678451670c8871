#include "cluster_node.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cluster_etcd.hpp"
#include "gpucap/cluster/node_curves.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/stderr_line.hpp"

namespace gpucap::cli {
namespace {

constexpr double kCurvePeriodS = 2.0;      // how often the demand is looked at
constexpr double kReportPeriodS = 1.0;     // how often status/<node> is written
constexpr double kDemandChange = 0.1;      // a curve is republished when the demand moves by this share

bool demand_moved(std::optional<double> published, std::optional<double> measured) {
  if (!measured) return false;
  if (!published) return true;
  return std::abs(*measured - *published) > kDemandChange * std::max(*published, 1.0);
}

}  // namespace

void add_cluster_node_flags(CLI::App& cmd, ClusterNodeFlags& flags) {
  cmd.add_option("--cluster-etcd", flags.etcd,
                 "Join a cluster that shares one power budget: its etcd (URL or comma-separated members). The cap then "
                 "comes from the cluster's coordinator only");
  cmd.add_option("--cluster", flags.cluster, "With --cluster-etcd: the cluster's name");
  cmd.add_option("--node", flags.node, "With --cluster-etcd: this node's ID, unique in the cluster");
  cmd.add_option("--priority", flags.priority, "With --cluster-etcd: what one unit of this node's throughput is worth "
                                               "against another node's")
      ->default_str("1");
  cmd.add_option("--cluster-lease-ttl", flags.lease_ttl_s, "With --cluster-etcd: the node's lease TTL in seconds")
      ->default_str("5");
  cmd.add_option("--cluster-safe-cap-timeout", flags.safe_cap_timeout_s,
                 "With --cluster-etcd: seconds without etcd before the node falls to its safe cap (the coordinators' "
                 "--safe-cap-timeout)")
      ->default_str("5");
  cmd.add_option("--cluster-safe-cap", flags.safe_cap_w,
                 "With --cluster-etcd: the cap in watts the node falls to without etcd (default: its lowest cap)");
  add_etcd_tls_flags(cmd, flags.tls, "--cluster-etcd");
}

void check_cluster_node_flags(const ClusterNodeFlags& f) {
  if (!f.enabled()) {
    if (!f.cluster.empty() || !f.node.empty() || f.priority != 1.0 || f.safe_cap_w || !f.tls.ca_file.empty() ||
        !f.tls.cert_file.empty() || !f.tls.key_file.empty()) {
      throw usage_error(
          "--cluster, --node, --priority, --cluster-safe-cap and --cluster-etcd-ca/-cert/-key go with --cluster-etcd URL");
    }
    return;
  }
  if (f.cluster.empty() || f.node.empty()) throw usage_error("--cluster-etcd needs --cluster NAME and --node ID");
  cluster::check_name(f.cluster, "--cluster");
  cluster::check_name(f.node, "--node");
  // The TLS files too, before the model is loaded and anything is served.
  EtcdFlags etcd;
  etcd.tls = f.tls;
  cluster::check_etcd_options(cluster::parse_etcd_endpoints(*f.etcd), etcd_options(etcd));
  if (!(f.priority > 0.0 && f.priority <= 1e6)) throw usage_error(fmt::format("--priority {:g} must be in (0, 1e6]", f.priority));
  if (f.safe_cap_w && !(*f.safe_cap_w > 0.0 && std::isfinite(*f.safe_cap_w))) {
    throw usage_error(fmt::format("--cluster-safe-cap {:g} must be a positive number of watts", *f.safe_cap_w));
  }
  (void)protocol_timing(f.lease_ttl_s, f.safe_cap_timeout_s);
}

ClusterNode::ClusterNode(const ClusterNodeFlags& flags, ClusterNodeSetup setup)
    : flags_(flags), setup_(std::move(setup)) {
  check_cluster_node_flags(flags_);
  setup_.capacity.priority = flags_.priority;
  cluster::validate(setup_.capacity);
  const double safe_cap_w = std::clamp(flags_.safe_cap_w.value_or(setup_.capacity.min_cap_w), setup_.capacity.min_cap_w,
                                       setup_.capacity.max_cap_w);
  EtcdFlags etcd;
  etcd.etcd = *flags_.etcd;
  etcd.cluster = flags_.cluster;
  etcd.tls = flags_.tls;
  store_ = connect_etcd(etcd);
  apply(setup_.capacity.min_cap_w, "start");

  cluster::AgentOptions options;
  options.cluster = flags_.cluster;
  options.node_id = flags_.node;
  options.timing = protocol_timing(flags_.lease_ttl_s, flags_.safe_cap_timeout_s);
  options.safe_cap_w = safe_cap_w;
  options.gpu = setup_.gpu;
  options.model = setup_.model;
  options.log = [program = setup_.program](std::string_view line) {
    print_stderr_line("gpucap {}: cluster: {}", program, line);
  };
  agent_ = std::make_unique<cluster::NodeAgent>(
      *store_, options, [this](double cap_w) { apply(cap_w, agent_ && agent_->fallen_back() ? "safe cap" : "allocation"); },
      applied_w_, loop_.now_s());
  agent_->set_curve(setup_.capacity);
  {
    std::lock_guard lock(mutex_);
    measured_.cap_w = applied_w_;
    measured_.power_w = std::nan("");
    measured_.gpu = setup_.gpu;
    measured_.model = setup_.model;
    measured_.simulated = setup_.simulated;
  }
  thread_ = std::thread([this] { loop_.run([this](double now_s) { return step(now_s); }); });
}

ClusterNode::~ClusterNode() {
  loop_.stop();
  if (thread_.joinable()) thread_.join();
  leaving_ = true;
  try {
    agent_->leave(loop_.now_s());
    if (report_lease_ != 0) store_->revoke_lease(report_lease_);
  } catch (const std::exception& e) {
    print_stderr_line("gpucap {}: cluster: leaving: {} (the lease expires on its own)", setup_.program, e.what());
  }
}

void ClusterNode::apply(double cap_w, const char* why) {
  if (leaving_) {
    // The job has ended (a run) or drained (serve): nothing runs any more, the node holds nothing
    // the budget must count. The GPU is left as the command leaves it (restored at its exit).
    print_stderr_line("gpucap {}: cluster cap {} {:.3f} W at {:.6f} (leaving: nothing runs any more)", setup_.program,
                      flags_.node, 0.0, cluster::unix_now_s());
    applied_w_ = 0.0;
    return;
  }
  // Standby (0 W: the budget cannot give every node its minimum) is not a state serve or run has:
  // the node holds its lowest cap and says so.
  const double settable_w = std::max(cap_w, setup_.capacity.min_cap_w);
  const bool raise = settable_w > applied_w_;
  const double before_s = cluster::unix_now_s();
  setup_.apply_cap(settable_w);
  const double logged_s = raise ? before_s : cluster::unix_now_s();
  print_stderr_line("gpucap {}: cluster cap {} {:.3f} W at {:.6f} ({}{})", setup_.program, flags_.node, settable_w, logged_s,
                    why, cap_w < settable_w ? fmt::format(": given {:g} W, standby is not supported, holding the lowest cap", cap_w)
                                            : "");
  applied_w_ = settable_w;
  std::lock_guard lock(mutex_);
  measured_.cap_w = settable_w;
}

void ClusterNode::observe(const serve::ServingWindow& window) {
  const double length_s = std::max(window.end_s - window.start_s, 1e-9);
  const double attainment =
      window.counts.answered > 0 ? static_cast<double>(window.counts.good) / static_cast<double>(window.counts.answered) : 1.0;
  observe_figures(static_cast<double>(window.counts.answered) / length_s, attainment,
                  window.power.empty() ? std::nan("") : window.power.max_w,
                  static_cast<double>(window.counts.arrivals) / length_s);
}

void ClusterNode::observe_figures(double throughput_rps, double slo_attainment, double power_w,
                                  std::optional<double> demand_rps) {
  std::lock_guard lock(mutex_);
  demand_rps_ = demand_rps;
  measured_.throughput_rps = throughput_rps;
  measured_.slo_attainment = slo_attainment;
  measured_.power_w = power_w;
}

double ClusterNode::step(double now_s) {
  const double next = agent_->step(now_s);
  if (now_s >= next_curve_s_) {
    next_curve_s_ = now_s + kCurvePeriodS;
    std::optional<double> demand;
    {
      std::lock_guard lock(mutex_);
      demand = demand_rps_;
    }
    if (demand_moved(published_demand_rps_, demand)) {
      published_demand_rps_ = demand;
      agent_->set_curve(cluster::demand_clipped(setup_.capacity, demand));
    }
  }
  if (now_s >= next_report_s_) {
    next_report_s_ = now_s + kReportPeriodS;
    report();
  }
  return std::min({next, next_curve_s_, next_report_s_});
}

void ClusterNode::report() {
  cluster::NodeReport report;
  {
    std::lock_guard lock(mutex_);
    report = measured_;
  }
  report.unix_s = cluster::unix_now_s();
  try {
    if (report_lease_ == 0 || !store_->keep_alive(report_lease_)) report_lease_ = store_->grant_lease(flags_.lease_ttl_s);
    (void)store_->put(cluster::PutOp{cluster::report_key(cluster::Keys(flags_.cluster), flags_.node),
                                     cluster::to_json(report), report_lease_});
  } catch (const cluster::StoreError&) {
    report_lease_ = 0;  // the agent logs etcd's absence; the report is tried again next time
  }
}

}  // namespace gpucap::cli
