#pragma once
// The node agent's core over any Store: registration under a lease, keep-alives, the curve it
// publishes, its allocation watched and applied through an actuator, acknowledgements, the fall-back
// to the safe cap (protocol.hpp's NodeSafety), and a graceful leave. No clock, no thread: the owner
// calls step(now) when the store has news or when the time step() returned comes. The real agent
// (`gpucap cluster agent`, later) wraps it with an NVML actuator and a real-time loop; the simulator
// with a twin.
//
// Registration is a transaction "create nodes/<id> if absent": a second node with the same ID (or
// this node restarted while its previous lease still lives) is refused with a log line and tries
// again after half a TTL. Its incarnation is the lease's id; allocations for another incarnation
// are ignored. A node acknowledges only an allocation it applied exactly — never a cap it lowered
// on its own — so the coordinator's bound never falls below what the node may go back up to.

#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "gpucap/cluster/coordinator.hpp"
#include "gpucap/cluster/curve.hpp"
#include "gpucap/cluster/protocol.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/cluster/store.hpp"

namespace gpucap::cluster {

struct AgentOptions {
  std::string cluster = "default";
  std::string node_id;
  ProtocolTiming timing;
  double safe_cap_w = 0.0;       // what it falls to without the store
  double apply_latency_s = 0.0;  // the actuator's delay, in the caller's time (simulator); 0: immediate
  std::string gpu;               // informational, published with the curve
  std::string model;
  LogFn log;                     // default: spdlog::warn
};

class NodeAgent {
 public:
  using Actuator = std::function<void(double cap_w)>;

  // `initial_cap_w`: what the node holds when the agent starts (0: not serving). Error(usage) for a
  // bad node name or timing.
  NodeAgent(Store& store, AgentOptions options, Actuator actuator, double initial_cap_w, double now_s);

  // The curve to publish: at registration, or as an update at the next step. Published as given
  // (the coordinator validates; a broken curve holds the node at its safe cap).
  void set_curve(NodeCurve curve);
  // Everything due at now_s; returns the latest time it wants to be called again.
  double step(double now_s);
  // Stops serving (cap 0), acknowledges it as leaving and revokes the lease. If the store cannot
  // be reached the lease simply expires (the coordinator then counts the node as lost).
  void leave(double now_s);

  [[nodiscard]] double cap_w() const { return applied_w_; }  // what the actuator was last told
  [[nodiscard]] bool registered() const { return registered_; }
  [[nodiscard]] std::int64_t incarnation() const { return incarnation_; }
  [[nodiscard]] bool fallen_back() const { return safety_.fallen_back(); }
  [[nodiscard]] std::size_t refused_registrations() const { return refused_; }

 private:
  struct PendingApply {
    double at_s = 0.0;
    double cap_w = 0.0;
    std::optional<Revision> ack_revision;  // acknowledge this allocation once applied
  };

  void log(const std::string& message);
  void try_register(double now_s);
  void keep_alive(double now_s);
  void resync(double now_s);
  void handle_alloc(const KeyValue& kv, double now_s);
  void poll(double now_s);
  void publish(double now_s);
  void schedule(double now_s, double cap_w, std::optional<Revision> ack_revision);
  void run_pending(double now_s);
  void send_ack(double now_s);
  void lose_lease(double now_s);

  Store& store_;
  AgentOptions options_;
  Keys keys_;
  Actuator actuator_;
  NodeSafety safety_;
  double applied_w_;
  std::optional<NodeCurve> curve_;
  bool curve_dirty_ = false;
  bool registered_ = false;
  bool left_ = false;
  LeaseId lease_ = 0;
  std::int64_t incarnation_ = 0;
  Revision registration_revision_ = 0;
  WatchId watch_ = 0;
  bool need_resync_ = false;
  double next_keepalive_s_ = 0.0;
  double retry_register_s_ = 0.0;
  std::deque<PendingApply> pending_;
  std::optional<AckRecord> ack_due_;
  std::size_t refused_ = 0;
};

}  // namespace gpucap::cluster
