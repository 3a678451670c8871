/* A read-only NVML for GPU machines one may only read from (scripts/gpu-measure.sh builds it where
 * the driver and a C compiler are there, and points GPUCAP_NVML_LIB at it):
 *
 *   cc -shared -fPIC -o libnvml-readonly.so scripts/nvml-readonly.c -Wl,--no-as-needed -l:libnvidia-ml.so.1
 *
 * It defines NVML's write calls, each of which refuses with NVML_ERROR_NO_PERMISSION and says so on
 * stderr, and depends on the driver's libnvidia-ml.so.1, so that every other symbol gpucap looks up
 * through this library's handle (dlsym searches a library's dependencies too) is the driver's own.
 * gpucap already writes nothing without --allow-gpu-control; this makes it impossible. */
#include <stdio.h>

#define NVML_ERROR_NO_PERMISSION 4

static int refuse(const char* call) {
  fprintf(stderr, "nvml-readonly: refused %s (this GPU may only be read)\n", call);
  return NVML_ERROR_NO_PERMISSION;
}

int nvmlDeviceSetGpuLockedClocks(void* device, unsigned min_mhz, unsigned max_mhz) {
  (void)device, (void)min_mhz, (void)max_mhz;
  return refuse("nvmlDeviceSetGpuLockedClocks");
}
int nvmlDeviceResetGpuLockedClocks(void* device) {
  (void)device;
  return refuse("nvmlDeviceResetGpuLockedClocks");
}
int nvmlDeviceSetMemoryLockedClocks(void* device, unsigned min_mhz, unsigned max_mhz) {
  (void)device, (void)min_mhz, (void)max_mhz;
  return refuse("nvmlDeviceSetMemoryLockedClocks");
}
int nvmlDeviceResetMemoryLockedClocks(void* device) {
  (void)device;
  return refuse("nvmlDeviceResetMemoryLockedClocks");
}
int nvmlDeviceSetPowerManagementLimit(void* device, unsigned limit_mw) {
  (void)device, (void)limit_mw;
  return refuse("nvmlDeviceSetPowerManagementLimit");
}
int nvmlDeviceSetApplicationsClocks(void* device, unsigned memory_mhz, unsigned sm_mhz) {
  (void)device, (void)memory_mhz, (void)sm_mhz;
  return refuse("nvmlDeviceSetApplicationsClocks");
}
int nvmlDeviceResetApplicationsClocks(void* device) {
  (void)device;
  return refuse("nvmlDeviceResetApplicationsClocks");
}
