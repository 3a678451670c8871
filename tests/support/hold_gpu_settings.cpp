// For the crash test: opens GPU 0 through NVML (argv[1], the fake in tests), changes its SM
// clock lock and power limit through a journaled ControlSession — exactly as a gpucap run does —
// prints "applied" and waits to be killed.

#include <unistd.h>

#include <cstdio>
#include <exception>

#include "gpucap/device/control_session.hpp"
#include "gpucap/device/nvml_device.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hold_gpu_settings NVML_LIBRARY\n");
    return 2;
  }
  try {
    const gpucap::device::NvmlLibrary nvml(argv[1]);
    gpucap::device::NvmlDevice gpu(nvml, 0);
    gpucap::device::RestoreJournal journal(gpucap::device::default_journal_path());
    gpucap::device::ControlSession session(gpu, journal, gpu.info().uuid);
    auto knobs = gpucap::single_tenant_knobs(8, 1005.0);
    knobs.power_limit_w = 250.0;
    session.apply(knobs);
    std::printf("applied\n");
    std::fflush(stdout);
    while (true) pause();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hold_gpu_settings: %s\n", e.what());
    return 1;
  }
}
