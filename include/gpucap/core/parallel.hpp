#pragma once
// A small work loop for the benches and simulators: independent tasks on a few threads.

#include <cstddef>
#include <functional>

namespace gpucap {

// Runs task(i) for every i in [0, n) on up to `threads` threads (the caller's among them), handing
// out indices in order. The first exception stops the handing out of work and is rethrown once
// every thread has finished. `finished_one`, if given, is called after each task that succeeded,
// one call at a time (a progress line).
void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& task,
                  const std::function<void()>& finished_one = {});

}  // namespace gpucap
