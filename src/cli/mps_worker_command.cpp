// gpucap mps-worker: internal. One MPS tenant's worker process, started by gpucap's MPS worker pool
// (runtime/mps.hpp) with its share in CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: loads a TorchScript
// model into the LibTorch engine and answers the pool's run commands (runtime/mps_protocol.hpp)
// on the descriptor in $GPUCAP_MPS_PROTOCOL_FD, or on stdin/stdout when started by hand.

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/engine/torch_plugin.hpp"
#include "gpucap/runtime/mps_worker.hpp"

namespace gpucap::cli {

namespace {

struct WorkerProcessFlags {
  EngineFlags engine;
  int protocol_fd = -1;  // -1: stdin and stdout
};

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void serve(const WorkerProcessFlags& flags) {
  if (flags.protocol_fd < -1 || (flags.protocol_fd >= 0 && flags.protocol_fd <= STDERR_FILENO)) {
    throw usage_error(fmt::format("--protocol-fd {} must be -1 (stdin/stdout) or 3 and up", flags.protocol_fd));
  }
  const int in_fd = flags.protocol_fd >= 0 ? flags.protocol_fd : STDIN_FILENO;
  const int out_fd = flags.protocol_fd >= 0 ? flags.protocol_fd : STDOUT_FILENO;
  const std::function<double()> now_s = steady_seconds;
  const auto load = [&flags, &now_s]() {
    // Options are checked inside, so that a bad flag is reported to the pool as well.
    return engine::load_torch_engine(torch_engine_options(flags.engine), now_s);
  };
  runtime::serve_mps_worker(load, in_fd, out_fd, now_s);
}

}  // namespace

Command add_mps_worker_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto flags = std::make_shared<WorkerProcessFlags>();
  auto* cmd = app.add_subcommand(
      "mps-worker",
      "INTERNAL: one tenant's worker process of the MPS path, started by gpucap (docs/mps.md); speaks "
      "newline-delimited JSON on --protocol-fd (default stdin/stdout)");
  cmd->group("");  // hidden from `gpucap --help`: not a command for users
  cmd->add_option("--model-file", flags->engine.model_file, "TorchScript model (scripts/export_models.py)")->required();
  cmd->add_option("--engine-device", flags->engine.engine_device, "Where the engine runs: cuda, cuda:N or cpu")
      ->capture_default_str();
  cmd->add_option("--precision", flags->engine.precision, "fp32, fp16 (CUDA only) or bf16 (default fp32)");
  cmd->add_flag("--cuda-graphs", flags->engine.cuda_graphs, "Replay each batch size's forward pass as a CUDA graph");
  cmd->add_option("--input-size", flags->engine.input_size, "Height = width of the input images")->capture_default_str();
  cmd->add_option("--seed", flags->engine.seed, "Seed of the synthetic input")->capture_default_str();
  cmd->add_option("--images-dir", flags->engine.images_dir, "A folder of JPEG images as the input (default: synthetic)");
  cmd->add_option("--protocol-fd", flags->protocol_fd,
                  "Descriptor to speak the protocol on, both ways (set by gpucap through $GPUCAP_MPS_PROTOCOL_FD); "
                  "-1: read stdin, write stdout")
      ->envname(runtime::kMpsProtocolFdEnv)
      ->capture_default_str();
  return {cmd, [flags] { serve(*flags); }};
}

}  // namespace gpucap::cli
