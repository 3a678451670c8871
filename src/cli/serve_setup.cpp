// `gpucap serve`'s setup before serving (serve_setup.hpp).

#include "serve_setup.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gpucap/control/capserve.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/engine/torch_plugin.hpp"
#include "gpucap/runtime/nvml_platform.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/serve/cap_state.hpp"

namespace gpucap::cli {
namespace {

constexpr const char* kNoopModel = "noop";
// The twin GPU's engine when the model is noop: the loop needs a model to idle the twin with;
// noop never runs it.
constexpr const char* kNoopTwinModel = "mobilenet_v1_0.25";
constexpr int kMaxBatchBound = 4096;

sim::Precision twin_precision(const std::string& text) {
  if (text == "fp32") return sim::Precision::fp32;
  if (text == "fp16") return sim::Precision::fp16;
  throw usage_error(fmt::format("--precision '{}' must be fp32 or fp16 on the twin", text));
}

// --noop-shape "3,224,224": the noop model's dimensions after the batch.
std::vector<std::int64_t> noop_dims(const std::string& text) {
  std::vector<std::int64_t> dims;
  for (const auto part : split(text, ',')) {
    const auto value = parse_integer(part);
    if (!value || *value < 1 || *value > 1'000'000) {
      throw usage_error(fmt::format("--noop-shape '{}': dimensions are whole numbers from 1 to 1000000", text));
    }
    dims.push_back(*value);
  }
  return dims;
}

// The model file's name is the KServe model's: it goes into URLs, JSON and metric labels, which
// hold UTF-8 only (Prometheus drops a whole scrape over one label that is not).
void check_model_name(const std::string& name) {
  try {
    (void)nlohmann::json(name).dump();
  } catch (const nlohmann::json::exception&) {
    throw usage_error("--model-file: the file's name (the served model's name) is not UTF-8 text; rename the file");
  }
}

std::shared_ptr<const predict::ProfileModel> load_profile(const std::string& path) {
  return std::make_shared<const predict::ProfileModel>(predict::load_profile_json(path));
}

// --warmup: whether the engine runs every batch size before serving.
bool wants_warmup(const std::string& warmup, const std::string& engine_device) {
  if (warmup == "on") return true;
  if (warmup == "off") return false;
  if (warmup == "auto") return engine_device.starts_with("cuda");
  throw usage_error(fmt::format("--warmup '{}' must be auto, on or off", warmup));
}

// Runs the model on zeros at every batch size from 1 to `max_batch_size`, twice each, the way a
// request's batch runs (from host memory, outputs back to it); on the thread that will run the
// batches (PyTorch keeps cuDNN's execution plans per thread). A batch size's first runs on a GPU
// are slow (cuDNN's plans, the TorchScript executor's specialisation to the shape, CUDA modules
// loaded on first use): on an H200 both settings answered at p99 180-410 ms in the first seconds
// of a ResNet-50 server at 2000 requests/s, and capserve read that p99 as the load's and held its
// queue short for the next 20 s (docs/measurements/2026-11-30-NVIDIA_H200-serve-run2). Triton
// offers the same as its model_warmup setting. Returns what ran, for the banner.
std::string warm_up(engine::Engine& engine, int input_size, int max_batch_size) {
  constexpr int kPasses = 2;  // the executor profiles a shape's first run and optimises the second
  const auto started = std::chrono::steady_clock::now();
  const auto per_image = static_cast<std::size_t>(3) * static_cast<std::size_t>(input_size) * static_cast<std::size_t>(input_size);
  engine::TensorData zeros;
  for (int batch = 1; batch <= max_batch_size; ++batch) {
    zeros.shape = {batch, 3, input_size, input_size};
    zeros.values.assign(per_image * static_cast<std::size_t>(batch), 0.0F);
    try {
      for (int pass = 0; pass < kPasses; ++pass) (void)engine.run_data(zeros);
    } catch (const std::exception& e) {
      // Before serving: a model that cannot run a batch the server would admit says so now.
      const auto* error = dynamic_cast<const Error*>(&e);
      throw Error(error ? error->code() : ErrorCode::device, fmt::format("warming the model up at batch size {}: {} (--max-batch-size bounds the batches; "
                                        "--warmup off skips the warm-up)", batch, e.what()));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return fmt::format("batch sizes 1-{}, {} passes each, {:.1f} s", max_batch_size, kPasses, seconds);
}

}  // namespace

Served twin_served(const ServeFlags& f, const sim::Catalog& catalog) {
  f.real.reject_on_twin(f.platform);
  reject_for_platform(f.allow_gpu_control, "--allow-gpu-control", "twin");
  reject_for_platform(f.warmup != "auto", "--warmup", "twin (its batches have no first-run cost)");
  Served s;
  const auto& gpu = catalog.gpu(f.gpu.value_or("a100"));
  const auto model_id = f.model.value_or("resnet50");
  const bool noop = model_id == kNoopModel;
  const auto& model = inference_model(catalog, noop ? kNoopTwinModel : model_id);
  runtime::SimOptions o;
  o.seed = parse_seed(f.seed);
  o.sample_hz = f.sample_hz;
  o.pace = runtime::parse_pace(f.pace);
  const auto precision = f.precision ? twin_precision(*f.precision) : model.precision;
  s.platform = std::make_unique<runtime::SimPlatform>(gpu, model, precision, o);
  s.min_cap_w = std::round(runtime::lowest_loaded_power_w(gpu) * 10.0) / 10.0;
  if (!noop && f.noop_shape != "16") throw usage_error("--noop-shape goes with --model noop");
  s.backend = noop ? service::make_noop_backend(f.max_batch_size, noop_dims(f.noop_shape))
                   : service::make_twin_backend(model.id, model.input_size, f.max_batch_size);
  s.gpu_id = gpu.id;
  s.gpu_name = gpu.name;
  s.identity = monitor::twin_identity(0, gpu.name, monitor::local_hostname());
  if (f.profile_path) {
    check_profile_origin(*f.profile_path, predict::load_profile_origin(*f.profile_path), twin_profile_check(gpu.id, model.id));
    s.profile = load_profile(*f.profile_path);
  } else if (f.algorithm == "capserve" || control::needs_profile(f.algorithm)) {
    s.profile = runtime::measure_default_profile(catalog, gpu.id, model.id, f.sample_hz,
                                                 sim::derive_seed(o.seed, runtime::kProfileSeedStream));
  }
  if (f.cluster.enabled()) {
    cluster::TwinCurveOptions curve_options;
    curve_options.slo_s = f.slo_ms / 1e3;
    const auto capacity = cluster::twin_capacity(gpu, model, curve_options);
    if (!capacity) throw usage_error(fmt::format("{} on the {} meets no {:g}-ms SLO under any cap: it cannot join a cluster", model.id, gpu.name, f.slo_ms));
    s.capacity = cluster::twin_capacity_curve(*capacity, s.min_cap_w);
  }
  return s;
}

Served nvml_served(const ServeFlags& f) {
  reject_for_platform(f.gpu.has_value(), "--gpu", "nvml (use --device N)");
  reject_for_platform(f.model.has_value(), "--model", "nvml (use --model-file FILE.pt)");
  if (!f.real.model_file) throw usage_error("--model-file FILE.pt is required on a real GPU (scripts/export_models.py)");
  check_model_name(std::filesystem::path(*f.real.model_file).stem().string());
  f.real.reject_for_requests();
  reject_for_platform(f.noop_shape != "16", "--noop-shape", "nvml (it goes with the twin's --model noop)");
  if ((f.algorithm == "capserve" || control::needs_profile(f.algorithm)) && !f.profile_path) {
    throw usage_error(fmt::format("{} on a real GPU runs from a profile of the model on it: --profile FILE (the JSON of "
                                  "'gpucap tune --platform nvml --algorithm oracle --json')",
                                  f.algorithm));
  }
  Served s;
  const auto engine_flags = f.real.engine(f.seed, f.precision);
  // The profile is checked before the model is loaded (what the flags say), and against the GPU
  // once NVML names it.
  auto profile_check = real_profile_check(f.real, engine_flags, f.allow_gpu_control);
  std::optional<predict::ProfileOrigin> measured;
  if (f.profile_path) {
    measured = predict::load_profile_origin(*f.profile_path);
    check_profile_origin(*f.profile_path, *measured, profile_check);
  }
  const bool warmup = wants_warmup(f.warmup, engine_flags.engine_device);
  s.platform = std::make_unique<runtime::NvmlPlatform>(
      f.real.platform(f.allow_gpu_control, f.sample_hz), [&engine_flags](std::function<double()> now_s) {
        return engine::load_torch_engine(torch_engine_options(engine_flags), std::move(now_s));
      });
  auto& nvml = dynamic_cast<runtime::NvmlPlatform&>(*s.platform);
  // The model's outputs, from one pass on a batch of one: what its metadata declares.
  engine::TensorData probe;
  probe.shape = {1, 3, f.real.input_size, f.real.input_size};
  probe.values.assign(static_cast<std::size_t>(3 * f.real.input_size * f.real.input_size), 0.0F);
  const auto outputs = nvml.engine().run_data(probe);
  service::kserve::ModelMetadata m;
  m.name = std::filesystem::path(*f.real.model_file).stem().string();
  m.versions = {"1"};
  m.platform = "pytorch_libtorch";
  m.max_batch_size = f.max_batch_size;
  m.inputs = {{"input", service::kserve::Datatype::fp32, {-1, 3, f.real.input_size, f.real.input_size}}};
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    auto shape = outputs[k].shape;
    if (!shape.empty()) shape.front() = -1;
    m.outputs.push_back({outputs.size() == 1 ? "output" : fmt::format("output{}", k), service::kserve::Datatype::fp32, shape});
  }
  s.backend = service::make_engine_backend(std::move(m), nvml.engine());
  if (warmup) {
    s.warm_up = [&engine = nvml.engine(), size = f.real.input_size, batch = f.max_batch_size] {
      return warm_up(engine, size, batch);
    };
  }
  const auto& info = nvml.gpu().info();
  // A cap below the board's lowest power limit is one no controller holds (it was 1 W: a PUT of 5
  // W was taken and capserve chased it by shedding nearly everything).
  if (info.power_limit_min_w > 0.0) s.min_cap_w = info.power_limit_min_w;
  s.gpu_id = info.name;
  s.gpu_name = info.name;
  s.identity = monitor::nvml_identity(info, monitor::local_hostname());
  if (measured) {
    profile_check.here.gpu = info.name;
    check_profile_origin(*f.profile_path, *measured, profile_check);
    s.profile = load_profile(*f.profile_path);
  }
  if (f.cluster.enabled()) {
    if (!s.profile) throw usage_error("--cluster-etcd on a real GPU needs --profile FILE: the node's curve comes from it");
    s.capacity = cluster::profile_capacity_curve(*s.profile, f.slo_ms / 1e3, std::max(info.power_limit_min_w, s.min_cap_w),
                                                 info.power_limit_max_w, info.power_limit_default_w);
  }
  return s;
}

void check_serve_algorithm(const std::string& algorithm) {
  if (algorithm == "capserve" || algorithm == "static") return;
  std::vector<std::string> served{"capserve", "static"};
  bool known = false;
  const auto name = to_lower(trim(algorithm));  // as the registry reads it
  for (const auto& a : control::algorithms()) {
    known = known || a.name == name;
    if (!control::needs_mps_planning(a.name) && !control::needs_offline_search(a.name)) served.push_back(a.name);
  }
  const auto choices = join(served, ", ");
  if (!known) throw usage_error(fmt::format("--algorithm '{}' is not one serve runs: {}", algorithm, choices));
  if (control::needs_mps_planning(name)) {
    throw usage_error(fmt::format("--algorithm {} partitions a GPU among MPS tenants, and serve runs one model: give one of {}",
                                  algorithm, choices));
  }
  if (control::needs_offline_search(name)) {
    throw usage_error(fmt::format("--algorithm {} runs from an offline search before a job (gpucap tune --algorithm {}); "
                                  "under serve give one of {}",
                                  algorithm, algorithm, choices));
  }
}

namespace {

// Without --allow-gpu-control a real GPU keeps its clocks and power limit: an algorithm that sets
// them is refused here, by name, rather than by the first write the GPU refuses.
void check_needs_no_gpu_writes(const control::ServingController& controller, const std::string& algorithm) {
  const auto needs = controller.requirements();
  std::vector<std::string> writes;
  if (needs.sm_clock) writes.emplace_back("locks the SM clock");
  if (needs.memory_clock) writes.emplace_back("locks the memory clock");
  if (needs.power_limit) writes.emplace_back("sets the power limit");
  if (writes.empty()) return;
  throw usage_error(fmt::format("--algorithm {} {}: on a real GPU it needs --allow-gpu-control (as root); without it "
                                "serve capserve, static, batchsizer, clipper or capfit, which move the batch cap, the "
                                "delay and admission only",
                                algorithm, join(writes, " and ")));
}

std::unique_ptr<control::ServingController> build_serving_controller(const ServeFlags& f, const Served& served,
                                                                     bool gpu_writes, double p99_window_s) {
  const auto limits = served.platform->controller_limits();
  const control::BatcherDefaults batcher{f.max_batch_size, f.max_queue_delay_us / 1e6};
  if (f.algorithm == "capserve") {
    control::CapserveParams p;
    p.profile = served.profile;
    p.slo_s = f.slo_ms / 1e3;
    p.max_batch_size = f.max_batch_size;
    p.limits = limits;
    p.p99_memory_s = p99_window_s;
    p.gpu_writes = gpu_writes;
    return std::make_unique<control::CapserveController>(p);
  }
  if (f.algorithm == "static") return std::make_unique<control::StaticServing>(batcher, limits, gpu_writes);
  control::ControllerOptions options;
  options.profile = served.profile;
  options.gpu_chooses_clocks = !gpu_writes;
  return std::make_unique<control::SeedServing>(control::make_controller(f.algorithm, options, limits), batcher);
}

}  // namespace

std::unique_ptr<control::ServingController> make_serving_controller(const ServeFlags& f, const Served& served,
                                                                     bool gpu_writes, double p99_window_s) {
  auto controller = build_serving_controller(f, served, gpu_writes, p99_window_s);
  if (!gpu_writes) check_needs_no_gpu_writes(*controller, f.algorithm);
  return controller;
}

std::pair<CapSchedule, std::string> initial_cap(const ServeFlags& f, const std::optional<std::string>& cap_file_text) {
  check_power_cap_flag(f.power_cap_w);
  if (f.cap_file && cap_file_text) {
    if (f.power_cap_w) {
      throw usage_error("--power-cap and --cap-file both set the cap at the start: give one (the file's cap holds from "
                        "the start, and until a --cap-schedule's first step)");
    }
    const double file_w = serve::parse_cap_file(*cap_file_text, *f.cap_file);
    if (!f.cap_schedule) return {CapSchedule::constant(file_w), "file"};
    auto schedule = CapSchedule::parse(*f.cap_schedule, &file_w);
    if (schedule.steps().front().cap_w != file_w) {
      throw usage_error("--cap-schedule starts at 0 s, where --cap-file sets the cap: start the schedule later (the "
                        "file's cap holds until its first step)");
    }
    return {std::move(schedule), "schedule"};
  }
  if (f.cap_schedule) return {schedule_from_flags(*f.cap_schedule, f.power_cap_w), "schedule"};
  if (f.power_cap_w) return {CapSchedule::constant(*f.power_cap_w), "flag"};
  throw usage_error("give the cap to start with: --power-cap W, --cap-schedule \"T:W,...\" or --cap-file F");
}

serve::BatcherConfig batcher_config(const ServeFlags& f) {
  if (f.max_batch_size < 1 || f.max_batch_size > kMaxBatchBound) {
    throw usage_error(fmt::format("--max-batch-size {} must be between 1 and {}", f.max_batch_size, kMaxBatchBound));
  }
  if (!(f.max_queue_delay_us >= 0.0 && f.max_queue_delay_us <= 60e6)) {
    throw usage_error(fmt::format("--max-queue-delay-us {:g} must be between 0 and 60000000", f.max_queue_delay_us));
  }
  if (!(f.queue_timeout_ms > 0.0 && f.queue_timeout_ms <= 3.6e6)) {
    throw usage_error(fmt::format("--queue-timeout-ms {:g} must be between 0 and 3600000", f.queue_timeout_ms));
  }
  serve::BatcherConfig c;
  c.max_batch_size = f.max_batch_size;
  c.preferred_batch_sizes = f.preferred_batch_sizes;
  c.max_queue_delay_s = f.max_queue_delay_us / 1e6;
  c.priority_levels = f.priority_levels;
  c.default_priority_level = f.priority_levels >= 2 ? f.priority_levels : 0;
  c.default_queue_policy.max_queue_size = f.max_queue_size;
  // Every request has a queue timeout, so every request is answered within a bound.
  c.default_queue_policy.default_timeout_s = f.queue_timeout_ms / 1e3;
  c.default_queue_policy.allow_timeout_override = true;
  serve::validate(c);
  return c;
}

}  // namespace gpucap::cli
