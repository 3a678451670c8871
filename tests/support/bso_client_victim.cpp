// A training program that goes away in the middle of a trial, for the tests of the BSO client's
// exit hooks. Usage: bso_client_victim SERVER_URL JOB_PREFIX MODE
//   signal     after one report, print "READY JOB_ID TRIAL" and wait to be killed by a signal
//   exit       after one report, print the line and std::exit(0): no destructor runs
//   terminate  after one report, print the line and let an exception escape main
// Exit status 3 if it is still running after 30 s.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpucap/bsoclient/client.hpp"
#include "support/fake_gpu.hpp"

namespace {

[[noreturn]] void go_away(const std::string& mode) {
  if (mode == "exit") std::exit(0);
  if (mode == "terminate") throw std::runtime_error("the training crashed");
  std::this_thread::sleep_for(std::chrono::seconds(30));
  std::exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: bso_client_victim SERVER_URL JOB_PREFIX signal|exit|terminate\n");
    return 2;
  }
  using namespace gpucap;
  test::FakeGpu gpu;
  test::FakeClock clock;
  monitor::Monitor meter({&gpu}, clock.function());
  bso::JobSpec job;
  job.job_id_prefix = argv[2];
  job.batch_sizes = {8, 16, 32};
  job.default_batch_size = 16;
  job.max_epochs = 10;
  bsoclient::ClientOptions options;
  options.http.server_url = argv[1];
  // Not a local: the client must be alive when the process goes away, as in a real training.
  auto* client = new bsoclient::BsoClient(options, job, meter);
  (void)client->get_batch_size();
  client->on_train_begin();
  clock.now_s += 10.0;
  gpu.energy_j += 2000.0;
  (void)client->on_evaluate(0.1);
  std::printf("READY %s %d\n", client->job().job_id.c_str(), client->trial()->trial_number);
  std::fflush(stdout);
  go_away(argv[3]);
}
