// A training program that links gpucap_bsoclient and nothing else of gpucap: it builds only if the
// client library resolves every symbol it uses from the modules it links (core, bso, device,
// monitor). tests/layering/CMakeLists.txt checks what else it links.
#include "gpucap/bso/job_spec.hpp"
#include "gpucap/bsoclient/client.hpp"
#include "gpucap/monitor/monitor.hpp"

namespace {

int train(gpucap::monitor::Monitor& monitor) {
  gpucap::bsoclient::BsoClient client({}, gpucap::bso::JobSpec{}, monitor);
  client.on_train_begin();
  return client.get_batch_size();
}

}  // namespace

int main() {
  // Never called: the program exists to be linked.
  int (*volatile keep)(gpucap::monitor::Monitor&) = &train;
  return keep == nullptr ? 1 : 0;
}
