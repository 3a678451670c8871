#pragma once
// Tests that stand for a thread or memory limit with a thread stack that cannot be mapped (1 TiB)
// ask first whether this machine maps it after all (vm.overcommit_memory = 1, or RAM and swap
// beyond it); where it does, the stack stands for no limit and they skip.

#include <pthread.h>

#include <cstddef>

namespace gpucap::test {

constexpr std::size_t kUnmappableStackBytes = std::size_t{1} << 40;

[[nodiscard]] inline bool thread_stack_can_be_mapped(std::size_t bytes) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, [](void*) -> void* { return nullptr; }, nullptr);
  pthread_attr_destroy(&attr);
  if (rc == 0) pthread_join(thread, nullptr);
  return rc == 0;
}

}  // namespace gpucap::test
