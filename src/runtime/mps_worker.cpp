#include "gpucap/runtime/mps_worker.hpp"

#include <fmt/format.h>

#include <exception>
#include <limits>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::runtime {

namespace {

// The worker waits for its next command for as long as gpucap wants: gpucap owns the timeouts.
constexpr double kNoDeadline = std::numeric_limits<double>::infinity();

MpsMeasurement measure_at(engine::Engine& engine, int batch, const MpsCommand& run,
                          const std::function<double()>& now_s) {
  const double warmup_start_s = now_s();
  while (now_s() - warmup_start_s < run.warmup_s) (void)engine.run_batch(batch);
  MpsMeasurement measured;
  measured.batch = batch;
  const double start_s = now_s();
  double end_s = start_s;
  do {
    measured.images += engine.run_batch(batch).images;
    end_s = now_s();
  } while (end_s - start_s < run.measure_s);
  measured.seconds = end_s - start_s;
  return measured;
}

void send(int out_fd, const MpsMessage& message) {
  if (!write_all(out_fd, encode(message))) {
    throw Error(ErrorCode::io, "mps-worker: gpucap closed the protocol channel");
  }
}

void send_error(int out_fd, const std::string& text) noexcept {
  MpsMessage message;
  message.kind = MpsMessage::Kind::error;
  message.message = text;
  try {
    (void)write_all(out_fd, encode(message));
  } catch (const std::exception&) {
    // Nothing more to say: the exception that got us here is what matters.
  }
}

}  // namespace

bool is_out_of_memory(const std::exception& error) {
  return to_lower(error.what()).find("out of memory") != std::string::npos;
}

MpsMeasurement measure_mps_round(engine::Engine& engine, const MpsCommand& run, const std::function<double()>& now_s) {
  int batch = run.batch;
  while (true) {
    try {
      return measure_at(engine, batch, run, now_s);
    } catch (const std::exception& error) {
      if (!is_out_of_memory(error) || batch <= 1) throw;
      batch /= 2;
    }
  }
}

void serve_mps_worker(const EngineLoader& load_engine, int in_fd, int out_fd, const std::function<double()>& now_s) {
  try {
    const auto engine = load_engine();
    MpsMessage ready;
    ready.kind = MpsMessage::Kind::ready;
    ready.share_pct = mps_share_from_environment();
    ready.engine = engine->name();
    send(out_fd, ready);
    LineReader commands(in_fd);
    std::string line;
    while (commands.next(kNoDeadline, &line) == LineReader::Status::line) {
      const auto command = parse_mps_command(line);
      if (command.kind == MpsCommand::Kind::quit) return;
      const auto measured = measure_mps_round(*engine, command, now_s);
      MpsMessage result;
      result.kind = MpsMessage::Kind::result;
      result.images = measured.images;
      result.seconds = measured.seconds;
      result.batch = measured.batch;
      send(out_fd, result);
    }
    // End of input: gpucap is gone or closed the channel; nothing left to do.
  } catch (const std::exception& error) {
    send_error(out_fd, error.what());
    throw;
  }
}

}  // namespace gpucap::runtime
