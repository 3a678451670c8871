// gpucap share: several jobs on one GPU under one policy (SwitchFlow's preemptive scheduler, or
// the free sharing, time slicing and MPS it was compared with), on the share twin (simulated) or,
// with --platform torch, on a real device through LibTorch (measured).

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "live_metrics.hpp"
#include "gpucap/core/atomic_file.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/share_real.hpp"
#include "gpucap/sched/cap_share.hpp"
#include "gpucap/sched/simulator.hpp"
#include "gpucap/sim/share_twin.hpp"

namespace gpucap::cli {
namespace {

struct ShareFlags {
  std::string gpu = "rtx2080ti";
  std::string lpu = "none";
  std::string policy = "switchflow";
  std::vector<std::string> jobs;
  std::string seed = "1";
  double max_time_s = 3600.0;
  bool json = false;
  std::optional<std::string> trace;
  std::string platform = "twin";
  std::optional<std::string> model_dir;
  std::string device = "cpu";
  int threads = 0;
  int lpu_threads = 1;
  std::optional<double> power_cap_w;
  std::optional<std::string> cap_schedule;
  std::string algorithm = "none";
  double window_s = 0.1;
  bool resume = false;
  LiveFlags live;  // --metrics, --pace
};

struct JobFigures {
  double p50_ms = 0.0;
  double p95_ms = 0.0;
  double p99_ms = 0.0;
};

JobFigures latency_figures(const sched::JobOutcome& job) {
  return {1e3 * job.latencies.percentile(50), 1e3 * job.latencies.percentile(95), 1e3 * job.latencies.percentile(99)};
}

nlohmann::json to_json(const sched::ShareScenario& scenario, const sched::ShareResult& result, bool simulated) {
  nlohmann::json jobs = nlohmann::json::array();
  for (std::size_t i = 0; i < result.jobs.size(); ++i) {
    const auto& j = result.jobs[i];
    const auto& spec = scenario.jobs[i];
    const auto lat = latency_figures(j);
    nlohmann::json job = {{"name", j.name},
                          {"spec", sched::to_spec_string(spec)},
                          {"throughput_img_s", j.throughput_items_s},
                          {"steps_done", j.steps_done},
                          {"steps_redone", j.steps_redone},
                          {"steps_suspended", j.steps_suspended},
                          {"steps_on_lpu", j.steps_on_lpu},
                          {"migrations", j.migrations},
                          {"oom", j.out_of_memory},
                          {"finished", j.finished},
                          {"start_s", j.start_s},
                          {"end_s", j.end_s}};
    if (spec.mode == sched::Mode::inference) {
      job["latency_ms"] = {{"p50", lat.p50_ms}, {"p95", lat.p95_ms}, {"p99", lat.p99_ms}};
      job["requests"] = j.latencies.count();
    }
    if (const auto slo = sched::slo_attainment(spec, j)) job["slo_attainment"] = *slo;
    jobs.push_back(job);
  }
  nlohmann::json preemptions = nlohmann::json::array();
  for (const auto& p : result.preemptions) {
    preemptions.push_back({{"at_s", p.at_s},
                           {"by", p.by},
                           {"victim", p.victim},
                           {"latency_ms", 1e3 * p.latency_s},
                           {"drain_ms", 1e3 * p.drain_s},
                           {"state_bytes", p.state_bytes},
                           {"state_variables", p.state_variables},
                           {"transfer_ms", 1e3 * p.transfer_s}});
  }
  nlohmann::json migrations = nlohmann::json::array();
  for (const auto& m : result.migrations) {
    migrations.push_back({{"at_s", m.at_s},
                          {"job", m.job},
                          {"from", m.from},
                          {"to", m.to},
                          {"state_bytes", m.state_bytes},
                          {"transfer_ms", 1e3 * m.transfer_s}});
  }
  nlohmann::json devices = nlohmann::json::array();
  double energy = 0.0;
  for (const auto& d : result.devices) {
    energy += d.energy_j;
    devices.push_back({{"id", d.id},
                       {"energy_j", d.energy_j},
                       {"busy_s", d.busy_s},
                       {"mean_power_w", result.makespan_s > 0 ? d.energy_j / result.makespan_s : 0.0}});
  }
  nlohmann::json cap = nullptr;
  if (scenario.cap) {
    const auto f = sched::cap_figures(scenario, result);
    nlohmann::json over = nlohmann::json::array();
    for (const auto& w : result.windows) {
      if (w.cap_w > 0.0 && w.mean_power_w > w.cap_w) {
        over.push_back({{"start_s", w.start_s}, {"end_s", w.end_s}, {"mean_power_w", w.mean_power_w}, {"cap_w", w.cap_w}});
      }
    }
    cap = {{"schedule", scenario.cap->to_string()},
           {"over_cap", over},
           {"window_s", scenario.window_s},
           {"windows", f.windows},
           {"windows_over_cap", f.over},
           {"windows_over_cap_outside_steps", f.over_outside_steps},
           {"max_over_cap_w", f.max_over_w},
           {"knob_changes", result.knob_changes.size()}};
  }
  return {{"simulated", simulated},
          {"cap", cap},
          {"preemption_count", result.preemption_count},
          {"migration_count", result.migration_count},
          {"gpu", scenario.gpu.id},
          {"lpu", scenario.lpu ? nlohmann::json(scenario.lpu->id) : nlohmann::json(nullptr)},
          {"policy", sched::to_string(scenario.policy)},
          {"makespan_s", result.makespan_s},
          {"energy_j", energy},
          {"jobs", jobs},
          {"preemptions", preemptions},
          {"migrations", migrations},
          {"devices", devices}};
}

void print_text(const sched::ShareScenario& scenario, const sched::ShareResult& result, const std::string& source) {
  std::cout << fmt::format("gpucap share: {} jobs on {} (low-priority device: {}), policy {} [{}]\n", scenario.jobs.size(),
                           scenario.gpu.id, scenario.lpu ? scenario.lpu->id : "none", sched::to_string(scenario.policy), source);
  for (std::size_t i = 0; i < result.jobs.size(); ++i) {
    const auto& j = result.jobs[i];
    const auto& spec = scenario.jobs[i];
    std::string line = fmt::format("  {:<10} {} {} batch {} priority {}: ", j.name, sched::to_string(spec.mode), spec.model,
                                   spec.batch_size, spec.priority);
    if (j.out_of_memory) {
      line += fmt::format("OUT OF MEMORY at {:.3f} s", j.end_s);
    } else {
      line += fmt::format("{:.1f} img/s, {} {} in {:.3f}–{:.3f} s{}", j.throughput_items_s, j.steps_done,
                          spec.mode == sched::Mode::inference ? "requests" : "steps", j.start_s, j.end_s,
                          j.finished ? "" : " (cut short)");
      if (spec.mode == sched::Mode::inference) {
        const auto lat = latency_figures(j);
        line += fmt::format(", latency p50 {:.2f} p95 {:.2f} p99 {:.2f} ms", lat.p50_ms, lat.p95_ms, lat.p99_ms);
      }
      if (const auto slo = sched::slo_attainment(spec, j)) line += fmt::format(", SLO {:g} ms met by {:.2f} %", *spec.slo_ms, 100.0 * *slo);
      if (j.steps_redone > 0) line += fmt::format(", {} steps redone", j.steps_redone);
      if (j.steps_suspended > 0) line += fmt::format(", resumed after {} preemptions", j.steps_suspended);
      if (j.migrations > 0) line += fmt::format(", {} moves, {} steps on the LPU", j.migrations, j.steps_on_lpu);
    }
    std::cout << line << '\n';
  }
  constexpr std::size_t kListed = 5;  // the first few in full, then a summary
  for (std::size_t i = 0; i < result.preemptions.size() && i < kListed; ++i) {
    const auto& p = result.preemptions[i];
    std::cout << fmt::format("  preemption at {:.3f} s: {} preempted {}, latency {:.2f} ms (drain {:.2f} ms)", p.at_s, p.by,
                             p.victim, 1e3 * p.latency_s, 1e3 * p.drain_s);
    if (p.state_bytes > 0) {
      std::cout << fmt::format(", {:.1f} MiB of state moved in {:.1f} ms", p.state_bytes / (1024.0 * 1024.0), 1e3 * p.transfer_s);
    }
    std::cout << '\n';
  }
  if (result.preemption_count > static_cast<std::int64_t>(kListed)) {
    const auto& latencies = result.preemption_latencies;
    std::cout << fmt::format("  ... {} preemptions in all, latency p50 {:.2f} p99 {:.2f} max {:.2f} ms\n", result.preemption_count,
                             1e3 * latencies.percentile(50), 1e3 * latencies.percentile(99), 1e3 * latencies.max_s());
  }
  double energy = 0.0;
  for (const auto& d : result.devices) {
    energy += d.energy_j;
    std::cout << fmt::format("  {}: {:.1f} J, mean {:.1f} W, busy {:.3f} s\n", d.id, d.energy_j,
                             result.makespan_s > 0 ? d.energy_j / result.makespan_s : 0.0, d.busy_s);
  }
  if (scenario.cap) {
    const auto f = sched::cap_figures(scenario, result);
    std::cout << fmt::format("  cap {}: {} of {} windows of {:g} s over it ({} outside the window after a cap step), "
                             "at most {:.1f} W over; {} knob changes\n",
                             scenario.cap->to_string(), f.over, f.windows, scenario.window_s, f.over_outside_steps, f.max_over_w,
                             result.knob_changes.size());
  }
  if (result.devices.empty()) {
    std::cout << fmt::format("makespan {:.3f} s [{}; energy not measured]\n", result.makespan_s, source);
  } else {
    std::cout << fmt::format("makespan {:.3f} s, energy {:.1f} J [{}]\n", result.makespan_s, energy, source);
  }
}

// --trace: every step written as it completes (opened before the run), none kept in memory, into
// FILE.partial-XXXXXX beside FILE, which replaces FILE only when the run ends: a full disk or a
// failed run leaves the previous FILE as it was (core/atomic_file.hpp; as run --trace does).
class TraceWriter final : public sched::StepSink {
 public:
  explicit TraceWriter(const std::string& path)
      : out_(path, AtomicFileWriter::Durability::flush, AtomicFileWriter::Unfinished::keep) {
    out_.write("job,step,device,start_s,end_s\n");
  }
  void on_step(const sched::StepRecord& s) override {
    out_.write(fmt::format("{},{},{},{:.9f},{:.9f}\n", s.job, s.step, s.device, s.start_s, s.end_s));
  }
  void close() { out_.commit(); }

 private:
  AtomicFileWriter out_;
};

// A job that cannot run even alone on the GPU is bad input, not an out-of-memory result (that is
// for jobs that do not fit together).
void check_fits_alone(const sim::ShareTwin& twin, const sched::JobSpec& job, const sched::DeviceInfo& gpu) {
  const auto p = twin.step(job, gpu, 0);
  const double need = p.persistent_bytes + p.activation_bytes;
  if (gpu.memory_bytes > 0.0 && need > gpu.memory_bytes) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    throw usage_error(fmt::format("job {} needs {:.1f} GiB on {}, which has {:.1f} GiB for it: it cannot run even alone "
                                  "(a smaller batch=?)",
                                  job.name, need / kGiB, gpu.id, gpu.memory_bytes / kGiB));
  }
}

// A cap below the GPU's idle power (with the jobs' CUDA contexts open: the share twin's
// idle_with_cuda_context_w, data/sched/devices.json) can never be kept: the GPU draws that much
// running nothing, so no clock, batch size or policy gets it under the cap.
void check_cap_above_idle(const CapSchedule& cap, const sched::DeviceInfo& gpu, const ShareFlags& flags) {
  for (const auto& step : cap.steps()) {
    if (step.cap_w >= gpu.idle_power_w) continue;
    const auto why = fmt::format("is below the {}'s idle power ({:g} W): the GPU draws that much with the jobs' contexts open "
                                 "and nothing running, so no setting keeps it under the cap",
                                 gpu.id, gpu.idle_power_w);
    if (!flags.cap_schedule) throw usage_error(fmt::format("--power-cap {:g} W {}", step.cap_w, why));
    throw usage_error(fmt::format("--cap-schedule {}: {:g} W from {:g} s {}", *flags.cap_schedule, step.cap_w, step.time_s, why));
  }
}

// --platform torch: the jobs on threads of this process, through LibTorch (runtime/share_real.hpp).
void run_on_torch(const ShareFlags& flags) {
  if (!flags.model_dir) throw usage_error("--platform torch needs --model-dir (models exported with --train --stages N)");
  if (flags.power_cap_w || flags.cap_schedule || flags.algorithm != "none") {
    throw usage_error("--platform torch does not take a power cap yet (capshare runs on the twin)");
  }
  runtime::RealShareOptions o;
  o.policy = sched::parse_policy(flags.policy);
  o.device = flags.device;
  if (flags.lpu != "none") o.lpu = flags.lpu;
  if (o.lpu && o.policy != sched::Policy::switchflow) {
    throw usage_error(fmt::format("--lpu is where switchflow moves a preempted job; policy {} does not move jobs", flags.policy));
  }
  o.threads = flags.threads;
  o.lpu_threads = flags.lpu_threads;
  o.seed = parse_seed(flags.seed);
  sched::ShareScenario scenario;  // for the report
  scenario.policy = o.policy;
  scenario.gpu.id = o.device;
  if (o.lpu) scenario.lpu = sched::DeviceInfo{*o.lpu, sched::DeviceKind::cpu, 0, 0, 0};
  std::vector<runtime::RealShareJob> jobs;
  for (const auto& text : flags.jobs) {
    scenario.jobs.push_back(sched::parse_job_spec(text));
    jobs.push_back(runtime::find_real_share_model(scenario.jobs.back(), *flags.model_dir));
  }
  if (flags.trace) throw usage_error("--trace is for the twin");
  if (flags.live.metrics || flags.live.pace) throw usage_error("--metrics and --pace are for the twin");
  const auto result = runtime::run_real_share(jobs, o);
  const std::string source = fmt::format("measured: LibTorch on {}", o.device);
  if (flags.json) {
    std::cout << to_json(scenario, result, false).dump(2) << '\n';
  } else {
    print_text(scenario, result, source);
  }
}

// The labels of every gpucap_* series of a share: algorithm, policy, the jobs' models, simulated.
monitor::Labels share_labels(const sched::ShareScenario& scenario, const std::string& algorithm) {
  std::vector<std::string> models;
  for (const auto& job : scenario.jobs) models.push_back(job.model);
  return {{"algorithm", algorithm}, {"policy", sched::to_string(scenario.policy)}, {"model", join(models, ",")},
          {"gpu_model", scenario.gpu.id}, {"gpu", "0"}, {"simulated", "true"}};
}

}  // namespace

Command add_share_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<ShareFlags>();
  auto* cmd = app.add_subcommand(
      "share", "Several jobs on one GPU: SwitchFlow's preemptive scheduler or free sharing, time slicing, MPS (on the twin or LibTorch)");
  cmd->add_option("--platform", flags->platform, "twin (the share twin, simulated) or torch (LibTorch on --device, measured)")
      ->capture_default_str();
  cmd->add_option("--model-dir", flags->model_dir,
                  "torch: folder of models exported with scripts/export_models.py --train --stages N (NAME.train.stages.json)");
  cmd->add_option("--device", flags->device, "torch: the shared device, cpu or cuda:N")->capture_default_str();
  cmd->add_option("--threads", flags->threads, "torch: intra-op threads of each job (0: LibTorch's default)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--lpu-threads", flags->lpu_threads, "torch: intra-op threads of a job moved to a CPU LPU")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--gpu", flags->gpu, "The shared GPU: rtx2080ti, gtx1080ti, v100 (the paper's, Keras models) or h200 (torch_resnet18, torch_mobilenet_v2)")->capture_default_str();
  cmd->add_option("--lpu", flags->lpu,
                  "Where switchflow moves a preempted job: another GPU, cpu (the shared GPU's host), or none (it waits); torch: a device string")
      ->capture_default_str();
  cmd->add_option("--policy", flags->policy, "switchflow, threads (free sharing), timeslice (one step at a time) or mps")
      ->capture_default_str();
  cmd->add_option("--job", flags->jobs,
                  "NAME=MODE:MODEL[:batch=B][:priority=high|low|N][:steps=N|:requests=N|:duration=S|:until=JOB][:start=S]"
                  "[:warmup=N][:rate=R][:slo_ms=X], e.g. bg=train:keras_vgg16:batch=32:until=fg or "
                  "fg=infer:keras_resnet50:batch=1:priority=high:requests=100:start=20")
      ->required();
  cmd->add_option("--seed", flags->seed, "twin: seed of the step-to-step variation of kernel times; torch: seed of the synthetic data")->capture_default_str();
  cmd->add_option("--max-time", flags->max_time_s, "twin: virtual seconds after which running jobs are cut short")
      ->capture_default_str()
      ->check(positive_number());
  cmd->add_flag("--json", flags->json, "Print JSON instead of text");
  cmd->add_option("--trace", flags->trace, "Write every step (job, step, device, start, end) to this CSV file")
      ->check(output_path());
  cmd->add_option("--power-cap", flags->power_cap_w, "Cap on the shared GPU's power, W (judged per --window)");
  cmd->add_option("--cap-schedule", flags->cap_schedule, "A cap that changes: SECONDS:WATTS,... e.g. 0:200,30:160");
  cmd->add_option("--algorithm", flags->algorithm,
                  "none (the policy alone) or capshare (gpucap: the SLO job keeps its latency, the training job gets the "
                  "power left: GPU clock and its batch size)")
      ->capture_default_str();
  cmd->add_option("--window", flags->window_s, "Power window, s")->capture_default_str()->check(positive_number());
  flags->live.add_to(*cmd, /*with_pace=*/true);
  cmd->add_flag("--resume", flags->resume,
                "switchflow: a preempted job that stays on the GPU resumes its step instead of redoing it (gpucap's "
                "runtime; capshare implies it)");
  return {cmd, [flags, &global, cmd] {
            // Each platform's own flags, given on the other, would go unused.
            if (flags->platform == "torch") {
              reject_given_for_platform(*cmd, {"--gpu", "--max-time", "--window", "--resume"}, "torch (a flag of the twin)");
              run_on_torch(*flags);
              return;
            }
            // `sim`, as other commands call the twin, is taken too.
            if (flags->platform != "twin" && flags->platform != "sim") {
              throw usage_error(fmt::format("--platform '{}' must be twin or torch", flags->platform));
            }
            reject_given_for_platform(*cmd, {"--model-dir", "--device", "--threads", "--lpu-threads"}, "twin (a flag of --platform torch)");
            const sim::ShareTwin twin(resolve_data_dir(global), parse_seed(flags->seed));
            sched::ShareScenario scenario;
            scenario.policy = sched::parse_policy(flags->policy);
            scenario.gpu = twin.device(flags->gpu);
            if (scenario.gpu.kind != sched::DeviceKind::gpu) throw usage_error(fmt::format("--gpu {} is not a GPU", flags->gpu));
            if (flags->lpu != "none") scenario.lpu = twin.lpu_device(flags->lpu, flags->gpu);
            if (scenario.lpu && scenario.policy != sched::Policy::switchflow) {
              throw usage_error(fmt::format("--lpu is where switchflow moves a preempted job; policy {} does not move jobs",
                                            flags->policy));
            }
            for (const auto& text : flags->jobs) scenario.jobs.push_back(sched::parse_job_spec(text));
            sched::check_jobs(scenario.jobs);
            int top_priority = sched::priority_low;
            for (const auto& job : scenario.jobs) top_priority = std::max(top_priority, job.priority);
            for (const auto& job : scenario.jobs) {
              twin.check(job, scenario.gpu);
              check_fits_alone(twin, job, scenario.gpu);
              // Only a job that a higher priority can preempt ever moves there.
              if (scenario.lpu && job.priority < top_priority) twin.check(job, *scenario.lpu);
            }
            scenario.max_time_s = flags->max_time_s;
            scenario.window_s = flags->window_s;
            if (flags->cap_schedule) {
              scenario.cap = schedule_from_flags(*flags->cap_schedule, flags->power_cap_w);
            } else if (flags->power_cap_w) {
              check_power_cap_flag(flags->power_cap_w);
              scenario.cap = CapSchedule::constant(*flags->power_cap_w);
            }
            if (scenario.cap) check_cap_above_idle(*scenario.cap, scenario.gpu, *flags);
            if (flags->resume && scenario.policy != sched::Policy::switchflow) {
              throw usage_error(fmt::format("--resume is how switchflow resumes a preempted job; policy {} preempts none",
                                            flags->policy));
            }
            if (cmd->count("--window") > 0 && !scenario.cap) {
              throw usage_error("--window is the window a power cap is judged over: give --power-cap or --cap-schedule");
            }
            scenario.resume_preempted = flags->resume;
            std::unique_ptr<sched::CapShareController> controller;
            if (flags->algorithm == "capshare") {
              if (scenario.policy != sched::Policy::switchflow) throw usage_error("--algorithm capshare runs with --policy switchflow");
              scenario.resume_preempted = true;
              if (!scenario.cap) throw usage_error("--algorithm capshare shares a power cap: give --power-cap or --cap-schedule");
              controller = std::make_unique<sched::CapShareController>(sched::build_cap_share_table(scenario, twin));
              scenario.controller = controller.get();
            } else if (flags->algorithm != "none") {
              throw usage_error(fmt::format("--algorithm '{}': expected none or capshare", flags->algorithm));
            }
            // Both before the run: a bad --pace or an address in use fails before anything is simulated.
            const auto pace = flags->live.pace_factor();
            flags->live.check_address();
            std::unique_ptr<LiveExport> live;
            if (flags->live.metrics) {
              live = std::make_unique<LiveExport>("share", *flags->live.metrics, share_labels(scenario, flags->algorithm), true);
            }
            std::unique_ptr<ShareLive> observer;
            if (live || pace) {
              const auto gpu = flags->live.labelled(
                  monitor::twin_identity(0, twin.device_name(scenario.gpu.id), monitor::local_hostname()));
              observer = std::make_unique<ShareLive>(pace ? std::optional<runtime::Pacer>(runtime::Pacer(*pace)) : std::nullopt,
                                                     live.get(), scenario, gpu);
              scenario.observer = observer.get();
            }
            flags->live.warn_if_unpaced("share");
            std::unique_ptr<TraceWriter> trace;
            if (flags->trace) {
              trace = std::make_unique<TraceWriter>(*flags->trace);
              scenario.step_sink = trace.get();
            }
            const auto result = sched::simulate_share(scenario, twin);
            if (trace) trace->close();
            if (flags->json) {
              std::cout << to_json(scenario, result, true).dump(2) << '\n';
            } else {
              print_text(scenario, result, "simulated: the share twin");
            }
          }};
}

}  // namespace gpucap::cli
