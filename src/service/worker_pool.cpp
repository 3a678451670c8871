#include "worker_pool.hpp"

#include <algorithm>
#include <system_error>
#include <utility>

namespace gpucap::service::detail {
namespace {

// The pool whose body-reader place the calling worker holds, if it holds one.
thread_local WorkerPool* t_reader_of = nullptr;

}  // namespace

WorkerPool::WorkerPool(std::size_t workers, Answer answer) : limit_(workers), answer_(std::move(answer)) {}

WorkerPool::~WorkerPool() { stop(); }

std::optional<Work> WorkerPool::submit(Work work) {
  {
    const std::lock_guard lock(mutex_);
    work_.push_back(std::move(work));
    if (work_.size() > idle_ && workers_.size() < limit_) {
      try {
        workers_.emplace_back([this] { work_loop(); });
        ++idle_;
      } catch (const std::system_error&) {
        if (workers_.empty()) {
          auto refused = std::move(work_.back());
          work_.pop_back();
          return refused;
        }
      }
    }
  }
  work_ready_.notify_one();
  return std::nullopt;
}

void WorkerPool::stop() {
  std::vector<std::thread> workers;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    workers.swap(workers_);  // nothing is submitted once the pool stops
  }
  work_ready_.notify_all();
  for (auto& worker : workers) worker.join();
}

std::deque<Work>::iterator WorkerPool::next_work() {
  if (body_readers_ < body_reader_limit(limit_)) return work_.begin();
  return std::find_if(work_.begin(), work_.end(), [](const Work& work) { return !work.reads_body; });
}

void WorkerPool::work_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    auto next = work_.end();
    work_ready_.wait(lock, [this, &next] {
      next = next_work();
      return next != work_.end() || (stopping_ && work_.empty());
    });
    if (next == work_.end()) return;
    auto work = std::move(*next);
    work_.erase(next);
    --idle_;
    if (work.reads_body) {
      ++body_readers_;
      t_reader_of = this;
    }
    const auto queued = Clock::now() - work.queued_at;
    lock.unlock();
    answer_(std::move(work), queued);
    body_read();  // if the answer did not say so itself
    lock.lock();
    ++idle_;
  }
}

void WorkerPool::body_read() {
  auto* pool = std::exchange(t_reader_of, nullptr);
  if (pool != nullptr) pool->release_reader();
}

void WorkerPool::release_reader() {
  {
    const std::lock_guard lock(mutex_);
    --body_readers_;
  }
  work_ready_.notify_all();  // a body that waited for a reader may go now
}

}  // namespace gpucap::service::detail
