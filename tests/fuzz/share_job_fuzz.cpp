// `gpucap share --job NAME=MODE:MODEL[:KEY=VALUE...]`: each line of the input is one --job value,
// parsed as the command line's are (sched::parse_job_spec), then the jobs checked together
// (sched::check_jobs). A parsed job written back (to_spec_string) must parse to the same job.

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "gpucap/sched/job.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace sched = gpucap::sched;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  std::vector<sched::JobSpec> jobs;
  for (int line = 0; line < 16 && !input.empty(); ++line) {
    const auto text = input.until("\n");
    refusals_only([&] {
      auto job = sched::parse_job_spec(text, 100);
      const auto written = sched::to_spec_string(job);
      bool reparsed = false;
      refusals_only([&] {
        const auto again = sched::parse_job_spec(written, 100);
        check(sched::to_spec_string(again) == written, "a job written back does not parse to the same job: " + written);
        reparsed = true;
      });
      check(reparsed, "a parsed job written back does not parse: " + written);
      jobs.push_back(std::move(job));
    });
  }
  refusals_only([&] { sched::check_jobs(jobs); });
  return 0;
}
