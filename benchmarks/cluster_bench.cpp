// The cluster coordinator's CPU per re-allocation (issue 37: 10,000 nodes in < 100 ms of CPU).
//
//   build/benchmarks/gpucap_benchmarks --benchmark_filter='Cluster'
//
// Curves are the twin's (every GPU of the catalogue × resnet50 and mobilenet_v2, each node's load a
// log-uniform fraction 0.15-1.3 of its capacity at TDP, as `cluster simulate` draws them); the
// budget is 70 % of the nodes' TDPs. BM_ClusterAllocate is the allocator alone; BM_ClusterRound is
// what the coordinator does when the budget changes: read the event, re-allocate, plan the writes
// and commit them in one transaction to the in-process store.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gpucap/cluster/allocator.hpp"
#include "gpucap/cluster/coordinator.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/cluster/store.hpp"
#include "gpucap/cluster/twin_curves.hpp"
#include "gpucap/sim/catalog.hpp"

namespace {

using namespace gpucap::cluster;

const gpucap::sim::Catalog& catalog() {
  static const auto instance = gpucap::sim::Catalog::load(GPUCAP_BENCH_DATA_DIR);
  return instance;
}

// min(capacity, demand) on the twin's grid, in units of the pair's capacity at TDP.
NodeCurve curve_of(const TwinCapacity& pair, double demand) {
  NodeCurve c;
  c.min_cap_w = pair.min_cap_w;
  c.max_cap_w = pair.max_cap_w;
  c.tdp_w = pair.tdp_w;
  for (std::size_t i = 0; i < pair.caps_w.size(); ++i) {
    c.points.push_back({pair.caps_w[i], std::min(pair.throughput_rps[i] / pair.tdp_rps, demand), 1.0});
  }
  return c;
}

struct Cluster {
  std::vector<NodeCurve> curves;
  double sum_tdp_w = 0.0;
};

const Cluster& cluster_of(std::size_t nodes) {
  static std::vector<std::pair<std::size_t, std::unique_ptr<Cluster>>> made;
  for (const auto& [n, c] : made) {
    if (n == nodes) return *c;
  }
  std::vector<TwinCapacity> pairs;
  for (const auto& gpu : catalog().gpus()) {
    for (const char* model : {"resnet50", "mobilenet_v2"}) {
      if (auto p = twin_capacity(gpu, catalog().model(model))) pairs.push_back(std::move(*p));
    }
  }
  auto cluster = std::make_unique<Cluster>();
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::size_t i = 0; i < nodes; ++i) {
    const auto& pair = pairs[static_cast<std::size_t>(u(rng) * static_cast<double>(pairs.size())) % pairs.size()];
    const double demand = std::exp(std::log(0.15) + u(rng) * (std::log(1.3) - std::log(0.15)));
    cluster->curves.push_back(curve_of(pair, demand));
    cluster->sum_tdp_w += pair.tdp_w;
  }
  made.emplace_back(nodes, std::move(cluster));
  return *made.back().second;
}

void BM_ClusterAllocate(benchmark::State& state) {
  const auto& cluster = cluster_of(static_cast<std::size_t>(state.range(0)));
  const auto policy = all_policies()[static_cast<std::size_t>(state.range(1))];
  std::vector<PreparedCurve> prepared;
  for (const auto& c : cluster.curves) prepared.emplace_back(c);
  std::vector<const PreparedCurve*> nodes;
  for (const auto& p : prepared) nodes.push_back(&p);
  const double budget = 0.7 * cluster.sum_tdp_w;
  for (auto _ : state) {
    auto allocation = allocate(budget, nodes, policy);
    benchmark::DoNotOptimize(allocation);
  }
  state.SetLabel(std::string(to_string(policy)));
}
BENCHMARK(BM_ClusterAllocate)
    ->ArgsProduct({{1000, 10000}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMillisecond);

// One coordinator, `nodes` registered nodes (records under live leases, no agents: nobody
// acknowledges, so each round's raises wait and its lowers go out), the budget stepping between
// 70 % and 65 % of the TDPs: every iteration is a whole re-allocation round and its transaction.
void BM_ClusterRound(benchmark::State& state) {
  const auto& cluster = cluster_of(static_cast<std::size_t>(state.range(0)));
  MemoryStore server(0.0, 1'000'000);
  auto facility = server.connect();
  auto client = server.connect({0.0, 1});
  const Keys keys("bench");
  for (std::size_t i = 0; i < cluster.curves.size(); ++i) {
    const LeaseId lease = facility->grant_lease(1e9);
    const NodeRecord record{lease, cluster.curves[i], cluster.curves[i].min_cap_w, 0.0, "", ""};
    (void)facility->put({keys.node("n" + std::to_string(i)), to_json(record), lease});
  }
  (void)facility->put({keys.budget(), budget_json(0.7 * cluster.sum_tdp_w), 0});
  CoordinatorOptions options;
  options.cluster = "bench";
  options.timing.lease_ttl_s = 1e6;
  options.timing.keepalive_period_s = 1e5;
  options.period_s = 1.0;
  options.plan_interval_s = 0.0;
  options.log = [](std::string_view) {};
  Coordinator coordinator(*client, options);
  double now = 0.0;
  (void)coordinator.step(now);  // leadership, the first read and round
  bool high = false;
  for (auto _ : state) {
    now += 1.0;
    server.advance_to(now);
    (void)facility->put({keys.budget(), budget_json((high ? 0.7 : 0.65) * cluster.sum_tdp_w), 0});
    high = !high;
    (void)coordinator.step(now);
  }
  state.counters["round_cpu_ms"] = coordinator.stats().max_round_cpu_s * 1000.0;
  state.counters["rounds"] = static_cast<double>(coordinator.stats().rounds);
}
BENCHMARK(BM_ClusterRound)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
