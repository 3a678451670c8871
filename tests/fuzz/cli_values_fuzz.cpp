// The small values of the command line that the library parses (the CLI11 flags only carry their
// text): server and etcd URLs, decision periods, batch-size and clock lists, --pace, hostname
// labels, `gpucap load --shape`, --sources, the names of kinds and policies, and the Inference-
// Header-Content-Length header. Input: one byte picks the parser, the rest is the value.

#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gpucap/bench/p40_log.hpp"
#include "gpucap/bso/job_spec.hpp"
#include "gpucap/bso/state.hpp"
#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/cluster/allocator.hpp"
#include "gpucap/cluster/etcd_store.hpp"
#include "gpucap/cluster/schema.hpp"
#include "gpucap/control/controller.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/core/server_url.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/engine/torch_engine.hpp"
#include "gpucap/monitor/gpu_metrics.hpp"
#include "gpucap/runtime/pacer.hpp"
#include "gpucap/serve/arrivals.hpp"
#include "gpucap/service/kserve_client.hpp"
#include "gpucap/service/kserve_protocol.hpp"
#include "gpucap/sim/specs.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  const unsigned which = input.choice(16);
  const auto text = input.rest();
  const std::string owned(text);
  switch (which) {
    case 0:
      refusals_only([&] {
        const auto url = gpucap::parse_server_url(text);
        check(url.scheme_host_port.starts_with("http://") || url.scheme_host_port.starts_with("https://"),
              "a server URL without http(s)://");
        check(!url.path_prefix.ends_with('/'), "a path prefix ending in /");
      });
      break;
    case 1:
      refusals_only([&] { check(!gpucap::cluster::parse_etcd_endpoints(text).empty(), "no etcd endpoint"); });
      break;
    case 2:
      refusals_only([&] {
        const auto period = gpucap::control::DecisionPeriod::parse(text);
        check((period.seconds > 0.0 && std::isfinite(period.seconds)) != (period.batches > 0), "a period that is neither time nor batches");
        (void)period.to_string();
      });
      break;
    case 3:
      refusals_only([&] {
        const auto sizes = gpucap::control::parse_batch_sizes(text);
        check(!sizes.empty(), "no batch size");
        for (const int b : sizes) check(b > 0, "a batch size that is not positive");
      });
      break;
    case 4:
      refusals_only([&] {
        for (const double c : gpucap::control::parse_clock_levels(text)) check(std::isfinite(c) && c > 0.0, "a bad clock level");
      });
      break;
    case 5:
      refusals_only([&] {
        const double pace = gpucap::runtime::parse_pace(owned);
        check(pace >= 0.01 && pace <= 10000.0, "a pace outside [0.01, 10000]");
      });
      break;
    case 6:
      refusals_only([&] { (void)gpucap::monitor::parse_hostname_label(owned); });
      break;
    case 7:
      refusals_only([&] {
        const auto shape = gpucap::service::kserve::parse_input_shape(text);
        check(!shape.name.empty(), "a shape without an input name");
      });
      break;
    case 8:
      refusals_only([&] { (void)gpucap::calibrate::parse_sources(owned); });
      break;
    case 9:
      refusals_only([&] { (void)gpucap::service::kserve::parse_header_length(text); });
      break;
    case 10:
      refusals_only([&] {
        const auto d = gpucap::parse_double(text);
        check(!d || std::isfinite(*d), "parse_double returned a number that is not finite");
        (void)gpucap::parse_integer(text);
        (void)gpucap::name_key(text);
        (void)gpucap::split(text, ',');
      });
      break;
    case 11:
      refusals_only([&] { (void)gpucap::bench::parse_p40_log_kind(text); });
      refusals_only([&] { (void)gpucap::sim::parse_pipeline_mode(text); });
      refusals_only([&] { (void)gpucap::serve::parse_arrival_spacing(text); });
      refusals_only([&] { (void)gpucap::engine::parse_torch_precision(owned); });
      break;
    case 12:
      refusals_only([&] { (void)gpucap::bso::parse_optimizer(text); });
      refusals_only([&] { (void)gpucap::bso::parse_stage(text); });
      refusals_only([&] { (void)gpucap::bso::parse_trial_type(text); });
      refusals_only([&] { (void)gpucap::bso::parse_trial_status(text); });
      (void)gpucap::cluster::parse_policy(text);
      break;
    case 13:
      // A cluster's name (--cluster) becomes the root of every etcd key.
      refusals_only([&] {
        const gpucap::cluster::Keys keys(owned);
        check(gpucap::cluster::Keys::id_under(keys.node("n1"), keys.nodes_prefix()) == std::string("n1"),
              "a node key does not give back its id");
      });
      (void)gpucap::cluster::valid_name(text);
      break;
    case 14:
      refusals_only([&] {
        const auto decoded = gpucap::cluster::base64_decode(text);
        check(gpucap::cluster::base64_decode(gpucap::cluster::base64_encode(decoded)) == decoded, "base64 does not round-trip");
      });
      break;
    default:
      refusals_only([&] { (void)gpucap::serve::RateSchedule::parse(text); });
      break;
  }
  return 0;
}
