#include "gpucap/runtime/share_real.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/engine/torch_plugin.hpp"
#include "gpucap/engine/torch_trainer.hpp"

namespace gpucap::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// The shared device's executor slot (SwitchFlow's invariant 1): one job at a time, the highest
// priority first, then by ask order. A job that asks while a lower-priority one holds it raises
// the holder's preempt flag; the holder yields at its next stage boundary and releases.
class Gate {
 public:
  Gate(std::vector<int> priorities, std::deque<std::atomic<bool>>& preempt, Clock::time_point t0)
      : priorities_(std::move(priorities)), preempt_(preempt), t0_(t0) {}

  void acquire(int j, std::vector<sched::Preemption>& preemptions, const std::vector<std::string>& names) {
    std::unique_lock lock(mutex_);
    const auto ticket = next_ticket_++;
    waiting_.push_back({j, ticket});
    if (owner_ >= 0 && priorities_[idx(owner_)] < priorities_[idx(j)] && !preempt_[idx(owner_)].load()) {
      preempt_[idx(owner_)].store(true, std::memory_order_release);
      sched::Preemption p;
      p.at_s = seconds_since_start();
      p.by = names[idx(j)];
      p.victim = names[idx(owner_)];
      preemptions.push_back(p);
      pending_ = preemptions.size() - 1;
      pending_by_ = j;
    }
    cv_.wait(lock, [&] { return owner_ < 0 && best_waiting() == j; });
    waiting_.erase(std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w.first == j; }));
    owner_ = j;
    preempt_[idx(j)].store(false, std::memory_order_release);
    if (pending_ && pending_by_ == j) {
      auto& p = preemptions[*pending_];
      p.latency_s = seconds_since_start() - p.at_s;
      pending_.reset();
    }
  }

  void release(int j, std::vector<sched::Preemption>& preemptions) {
    {
      const std::lock_guard lock(mutex_);
      if (owner_ != j) return;
      if (pending_) {
        auto& p = preemptions[*pending_];
        if (p.drain_s == 0.0) p.drain_s = seconds_since_start() - p.at_s;
      }
      owner_ = -1;
    }
    cv_.notify_all();
  }

  std::mutex& mutex() { return mutex_; }  // also guards the shared result vectors

 private:
  static std::size_t idx(int j) { return static_cast<std::size_t>(j); }
  double seconds_since_start() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  int best_waiting() const {
    int best = -1;
    std::uint64_t best_ticket = 0;
    for (const auto& [j, ticket] : waiting_) {
      if (best < 0 || priorities_[idx(j)] > priorities_[idx(best)] ||
          (priorities_[idx(j)] == priorities_[idx(best)] && ticket < best_ticket)) {
        best = j;
        best_ticket = ticket;
      }
    }
    return best;
  }

  std::vector<int> priorities_;
  std::deque<std::atomic<bool>>& preempt_;
  Clock::time_point t0_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int owner_ = -1;
  std::deque<std::pair<int, std::uint64_t>> waiting_;
  std::uint64_t next_ticket_ = 0;
  std::optional<std::size_t> pending_;  // the preemption whose asker has not got the gate yet
  int pending_by_ = -1;
};

class RealShare {
 public:
  RealShare(const std::vector<RealShareJob>& jobs, const RealShareOptions& o) : jobs_(jobs), o_(o) {
    for (const auto& job : jobs) {
      engine::TorchTrainerOptions t;
      t.stage_files = job.stage_files;
      t.device = o.device;
      t.batch_size = job.spec.batch_size;
      t.input_size = job.input_size;
      t.seed = o.seed;
      t.threads = o.threads;
      trainers_.push_back(engine::load_torch_trainer(t));
      names_.push_back(job.spec.name);
      priorities_.push_back(job.spec.priority);
      preempt_.emplace_back(false);
      live_.emplace_back(false);
      ended_.emplace_back(false);
      on_lpu_.push_back(0);
      result_.jobs.emplace_back();
      result_.jobs.back().name = job.spec.name;
      result_.jobs.back().start_s = job.spec.start_s;
      result_.jobs.back().latencies = sched::LatencyRecord(job.spec.slo_ms);
    }
  }

  sched::ShareResult run() {
    t0_ = Clock::now();
    Gate gate(priorities_, preempt_, t0_);
    gate_ = &gate;
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(jobs_.size());
    for (std::size_t j = 0; j < jobs_.size(); ++j) {
      threads.emplace_back([this, j, &errors] {
        try {
          run_job(j);
        } catch (...) {
          errors[j] = std::current_exception();
          end(j);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    for (const auto& job : result_.jobs) result_.makespan_s = std::max(result_.makespan_s, job.end_s);
    // A measured run lists every preemption and move (as many as wall-clock time allows).
    result_.preemption_count = static_cast<std::int64_t>(result_.preemptions.size());
    for (const auto& p : result_.preemptions) result_.preemption_latencies.add(p.latency_s);
    result_.migration_count = static_cast<std::int64_t>(result_.migrations.size());
    return std::move(result_);
  }

 private:
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  bool higher_priority_live(std::size_t j) const {
    for (std::size_t k = 0; k < jobs_.size(); ++k) {
      if (k != j && live_[k].load() && priorities_[k] > priorities_[j]) return true;
    }
    return false;
  }

  bool should_stop(std::size_t j, std::int64_t done) const {
    const auto& spec = jobs_[j].spec;
    if (spec.steps && done >= *spec.steps) return true;
    if (spec.requests && done >= *spec.requests) return true;
    if (spec.until) {
      for (std::size_t k = 0; k < jobs_.size(); ++k) {
        if (jobs_[k].spec.name == *spec.until && ended_[k].load()) return true;
      }
    }
    return false;
  }

  void end(std::size_t j) {
    live_[j].store(false);
    ended_[j].store(true);
  }

  void move(std::size_t j, const std::string& to, bool to_lpu) {
    auto& trainer = *trainers_[j];
    const auto from = trainer.device();
    const double at = now_s();
    const auto transfer = trainer.move_to(to);
    trainer.set_threads(to_lpu ? o_.lpu_threads : o_.threads);
    const std::lock_guard lock(gate_->mutex());
    result_.migrations.push_back({at, names_[j], from + (on_lpu_[j] != 0 ? " (LPU)" : ""), to + (to_lpu ? " (LPU)" : ""),
                                  static_cast<double>(transfer.bytes), static_cast<int>(transfer.variables), transfer.seconds});
    for (auto it = result_.preemptions.rbegin(); it != result_.preemptions.rend() && to_lpu; ++it) {
      if (it->victim == names_[j] && it->state_bytes == 0.0) {
        it->state_bytes = static_cast<double>(transfer.bytes);
        it->state_variables = static_cast<int>(transfer.variables);
        it->transfer_s = transfer.seconds;
        break;
      }
    }
    ++result_.jobs[j].migrations;
    on_lpu_[j] = to_lpu ? 1 : 0;
  }

  // One step (training) or request (inference) through the policy; false: preempted, redo it.
  bool run_step(std::size_t j) {
    auto& trainer = *trainers_[j];
    const bool training = jobs_[j].spec.mode == sched::Mode::training;
    const auto step = [&](const std::atomic<bool>* preempt) {
      if (preempt == nullptr) return training ? trainer.step() : trainer.infer_step();
      const engine::YieldCheck yield = [preempt] { return preempt->load(std::memory_order_acquire); };
      return training ? trainer.step(yield) : trainer.infer_step(yield);
    };
    if (o_.policy == sched::Policy::threads || on_lpu_[j] != 0) return step(nullptr);
    gate_->acquire(static_cast<int>(j), result_.preemptions, names_);
    bool done = false;
    try {
      done = step(&preempt_[j]);
    } catch (...) {
      gate_->release(static_cast<int>(j), result_.preemptions);
      throw;
    }
    gate_->release(static_cast<int>(j), result_.preemptions);
    return done;
  }

  void run_job(std::size_t j) {
    const auto& spec = jobs_[j].spec;
    std::this_thread::sleep_until(t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec.start_s)));
    live_[j].store(true);
    auto& out = result_.jobs[j];
    std::int64_t done = 0;
    double measured_from = now_s();
    std::int64_t measured_items = 0;
    bool redo = false;  // the last try of this step was preempted
    double issue = 0.0;
    while (!should_stop(j, done)) {
      // A step boundary (also before a redo): move to or from the LPU first.
      if (o_.policy == sched::Policy::switchflow && o_.lpu && spec.mode == sched::Mode::training) {
        const bool away = higher_priority_live(j);
        if (away && on_lpu_[j] == 0) move(j, *o_.lpu, true);
        if (!away && on_lpu_[j] != 0) move(j, o_.device, false);
      }
      if (!redo) {
        issue = now_s();
        if (spec.rate_per_s) {  // open loop: request `done` is sent on its schedule
          const double due = spec.start_s + static_cast<double>(done) / *spec.rate_per_s;
          if (due > issue) {
            std::this_thread::sleep_until(t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(due)));
          }
          issue = due;
        }
      }
      const bool lpu = on_lpu_[j] != 0;
      redo = !run_step(j);
      if (redo) {
        ++out.steps_redone;
        continue;
      }
      ++done;
      const double end = now_s();
      out.steps_done = done;
      out.items_done += spec.batch_size;
      if (lpu) ++out.steps_on_lpu;
      if (done <= spec.warmup) {
        measured_from = end;
      } else {
        measured_items += spec.batch_size;
        if (spec.mode == sched::Mode::inference) out.latencies.add(end - issue);
      }
    }
    out.end_s = now_s();
    out.finished = true;
    if (out.end_s > measured_from) out.throughput_items_s = static_cast<double>(measured_items) / (out.end_s - measured_from);
    end(j);
  }

  const std::vector<RealShareJob>& jobs_;
  RealShareOptions o_;
  std::vector<std::unique_ptr<engine::TorchTrainer>> trainers_;
  std::vector<std::string> names_;
  std::vector<int> priorities_;
  std::deque<std::atomic<bool>> preempt_;
  std::deque<std::atomic<bool>> live_;
  std::deque<std::atomic<bool>> ended_;
  std::vector<char> on_lpu_;  // per job, touched only by its own thread
  Clock::time_point t0_;
  Gate* gate_ = nullptr;
  sched::ShareResult result_;
};

}  // namespace

RealShareJob find_real_share_model(const sched::JobSpec& spec, const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  RealShareJob job;
  job.spec = spec;
  const auto list = dir / (spec.model + ".train.stages.json");
  const auto whole = dir / (spec.model + ".train.pt");
  if (std::filesystem::exists(list)) {
    const auto json = load_json_file(list.string());
    const JsonFields fields(json, list.string());
    job.input_size = static_cast<int>(fields.positive_integer("input_size"));
    const auto& stages = fields.at("stages");
    if (!stages.is_array() || stages.empty()) throw fields.error("stages", "must list the stage files");
    for (const auto& s : stages) {
      if (!s.is_string()) throw fields.error("stages", "must list file names");
      job.stage_files.push_back((dir / s.get<std::string>()).string());
    }
  } else if (std::filesystem::exists(whole)) {
    job.stage_files.push_back(whole.string());
    job.input_size = 224;
  } else {
    throw Error(ErrorCode::io, fmt::format("job {}: no {} or {} (scripts/export_models.py --out {} --models {} --train --stages 3)",
                                           spec.name, list.string(), whole.string(), model_dir, spec.model));
  }
  return job;
}

sched::ShareResult run_real_share(const std::vector<RealShareJob>& jobs, const RealShareOptions& options) {
  if (options.policy != sched::Policy::threads && options.policy != sched::Policy::switchflow) {
    throw usage_error(fmt::format("--platform torch runs the threads and switchflow policies, not {}", sched::to_string(options.policy)));
  }
  std::vector<sched::JobSpec> specs;
  for (const auto& job : jobs) {
    if (job.spec.duration_s) throw usage_error(fmt::format("job {}: on a real device give steps= or requests=, not duration=", job.spec.name));
    // The real path feeds synthetic tensors; JPEG pipelines and their reuse are modelled on the twin only.
    if (job.spec.jpeg_input || job.spec.reuse_input) {
      throw usage_error(fmt::format("job {}: input=jpeg and reuse= run on the twin only (--platform twin)", job.spec.name));
    }
    specs.push_back(job.spec);
  }
  sched::check_jobs(specs);
  if (options.lpu_threads < 1) throw usage_error("--lpu-threads must be at least 1");
  return RealShare(jobs, options).run();
}

}  // namespace gpucap::runtime
