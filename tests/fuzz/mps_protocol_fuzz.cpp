// The MPS workers' line protocol (runtime/mps_protocol): the commands a worker reads
// (parse_mps_command, `gpucap mps-worker`) and the messages gpucap reads from its workers
// (parse_mps_message). A line that parses is written back (encode) and must parse to the same.
// Input: byte 0 picks the direction, the rest is the line.

#include <cmath>
#include <cstdint>

#include "fuzz_support.hpp"
#include "gpucap/runtime/mps_protocol.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace runtime = gpucap::runtime;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  const unsigned which = input.choice(2);
  const auto line = input.rest();
  if (which == 0) {
    refusals_only([&] {
      const auto command = runtime::parse_mps_command(line);
      if (command.kind == runtime::MpsCommand::Kind::run) {
        check(command.batch >= 1 && command.warmup_s >= 0.0 && command.measure_s > 0.0, "a run command out of range");
      }
      const auto written = runtime::encode(command);
      bool reparsed = false;
      refusals_only([&] {
        const auto again = runtime::parse_mps_command(written);
        check(again.kind == command.kind && again.batch == command.batch && again.warmup_s == command.warmup_s &&
                  again.measure_s == command.measure_s,
              "a command written back parses differently: " + written);
        reparsed = true;
      });
      check(reparsed, "a command written back does not parse: " + written);
    });
  } else {
    refusals_only([&] {
      const auto message = runtime::parse_mps_message(line);
      const auto written = runtime::encode(message);
      bool reparsed = false;
      refusals_only([&] {
        const auto again = runtime::parse_mps_message(written);
        check(again.kind == message.kind && again.share_pct == message.share_pct && again.engine == message.engine &&
                  again.images == message.images && again.seconds == message.seconds && again.batch == message.batch &&
                  again.message == message.message,
              "a message written back parses differently: " + written);
        reparsed = true;
      });
      check(reparsed, "a message written back does not parse: " + written);
    });
  }
  return 0;
}
