#pragma once
// The workers of a GuardedServer (internal to src/service): threads, started as needed up to a
// limit, that answer the requests the waiting thread hands over, with some kept for requests that
// have arrived whole.

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpucap/service/guarded_server.hpp"
#include "request_stream.hpp"

namespace gpucap::service::detail {

// A request for a worker: its connection and what the waiting thread collected of it.
struct Work {
  int fd = -1;
  std::string buffer;
  std::size_t served = 0;  // requests answered on the connection before it
  Clock::time_point first_byte;
  GuardedServer::EarlyTicket ticket;
  bool reads_body = false;  // the worker reads its body from the client (it has not all come)
  Clock::time_point queued_at = Clock::now();
};

class WorkerPool {
 public:
  // `answer` runs on a worker, with how long the request waited for it.
  using Answer = std::function<void(Work work, Clock::duration queued)>;
  WorkerPool(std::size_t workers, Answer answer);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues the request for a worker, starting one if none is idle. When no thread can be started
  // (a cgroup's limit on tasks, memory) the workers there are take it in turn; with none at all it
  // is given back, for the caller to refuse rather than the process end.
  [[nodiscard]] std::optional<Work> submit(Work work);
  // Lets the workers answer what is queued, then joins them.
  void stop();
  // The calling worker has read the body of the request it answers (or will not read it): its
  // place among the body readers goes to the next body, while it goes on to answer (an inference
  // waits for its batch). Does nothing on a thread that holds no place.
  static void body_read();

  // A worker reading a body is held by its client up to the request's deadline: clients that send
  // headers and then their body slowly, or never, could hold every worker. At most this many read
  // bodies at once; the others answer requests that have arrived whole (one worker does both).
  [[nodiscard]] static std::size_t body_reader_limit(std::size_t workers) {
    return workers > 1 ? workers - std::max<std::size_t>(1, workers / 4) : 1;
  }

 private:
  void work_loop();
  void release_reader();
  // The request a worker takes next: the first in line or, while the body readers are all busy,
  // the first that has arrived whole (end(): none it may take). Under mutex_.
  std::deque<Work>::iterator next_work();

  const std::size_t limit_;
  const Answer answer_;
  std::mutex mutex_;  // guards what follows
  std::deque<Work> work_;
  std::condition_variable work_ready_;
  std::vector<std::thread> workers_;
  std::size_t idle_ = 0;
  std::size_t body_readers_ = 0;
  bool stopping_ = false;
};

}  // namespace gpucap::service::detail
