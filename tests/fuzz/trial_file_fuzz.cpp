// Trial files: the measured trials of `gpucap tune`/`profile` on a real GPU, which a later run
// resumes from and `capfit --profile` reads (runtime/platform_tuning: read_trial_file, TrialFile).
// A file that reads is opened as the search opens it, every trial looked up, one trial added
// (the file rewritten) and read back: the same trials, one more. Input: the file.

#include <cstdint>

#include "fuzz_support.hpp"
#include "gpucap/runtime/platform_tuning.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace runtime = gpucap::runtime;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gpucap::fuzz::ScratchFile file("trials.json");
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  refusals_only([&] {
    const auto contents = runtime::read_trial_file(file.write(content));
    runtime::TrialFile trials(file.path(), contents.setup);
    check(trials.size() == contents.trials.size(), "the trial file opened with another number of trials");
    for (const auto& [point, trial] : contents.trials) check(trials.find(point).has_value(), "a trial of the file is not found");
    gpucap::tune::ConfigPoint point;
    point.batch_size = 7;
    point.sm_clock_mhz = 1234.5;
    runtime::PlatformTrial added;
    added.result.throughput_img_s = 100.0;
    added.result.max_power_w = 150.0;
    trials.add(point, added);
    const auto again = runtime::read_trial_file(file.path());
    check(again.setup == contents.setup, "the setup changed when a trial was added");
    check(again.trials.size() == contents.trials.size() + 1, "adding a trial did not add one");
    for (std::size_t i = 0; i < contents.trials.size(); ++i) {
      check(again.trials[i].first == contents.trials[i].first, "a trial's point changed when the file was rewritten");
      check(again.trials[i].second.result.max_power_w == contents.trials[i].second.result.max_power_w,
            "a trial's power changed when the file was rewritten");
    }
  });
  return 0;
}
