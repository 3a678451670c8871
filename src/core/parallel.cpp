#include "gpucap/core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucap {

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& task,
                  const std::function<void()>& finished_one) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::exception_ptr failure;
  const auto worker = [&] {
    while (true) {
      const auto index = next.fetch_add(1);
      if (index >= n) return;
      try {
        task(index);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
        next = n;  // stop handing out work
        return;
      }
      if (finished_one) {
        const std::lock_guard lock(mutex);
        finished_one();
      }
    }
  };
  const auto thread_count = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, threads)), n);
  {
    // jthreads join when this block ends, also if starting one of them throws.
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < thread_count; ++t) pool.emplace_back(worker);
    worker();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace gpucap
