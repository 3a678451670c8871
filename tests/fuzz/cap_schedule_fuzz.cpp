// --cap-schedule (run, serve, share, bench: "0:150,85:125,170:100") and `gpucap load`'s
// --rate-schedule ("0:50,30:100"), with the arrival process a rate schedule drives.
// Input: one byte of choices, then the schedule's text.

#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/serve/arrivals.hpp"

using gpucap::CapSchedule;
using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;

namespace {

void cap_schedule(std::string_view text, bool with_initial_cap) {
  const double initial = 150.0;
  refusals_only([&] {
    const auto schedule = CapSchedule::parse(text, with_initial_cap ? &initial : nullptr);
    const auto& steps = schedule.steps();
    check(!steps.empty() && steps.front().time_s == 0.0, "a schedule that does not start at 0");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      check(std::isfinite(steps[i].cap_w) && steps[i].cap_w > 0.0, "a cap that is not positive and finite");
      check(i == 0 || steps[i].time_s > steps[i - 1].time_s, "step times that do not increase");
      check(schedule.cap_at(steps[i].time_s) == steps[i].cap_w, "cap_at(step time) is not the step's cap");
    }
    check(schedule.min_cap_w() <= schedule.max_cap_w(), "min cap above max cap");
    (void)schedule.to_string();
    (void)schedule.distinct_caps();
    refusals_only([&] { schedule.check_range(50.0, 250.0, "the GPU's range"); });
  });
}

void rate_schedule(std::string_view text, unsigned spacing) {
  refusals_only([&] {
    auto schedule = gpucap::serve::RateSchedule::parse(text);
    (void)schedule.to_string();
    check(schedule.expected_arrivals(10.0) >= 0.0, "negative expected arrivals");
    // A bounded process: at most 2000 arrivals in 60 s.
    auto process = gpucap::serve::ArrivalProcess::from_schedule(
        std::move(schedule), spacing == 0 ? gpucap::serve::ArrivalSpacing::poisson : gpucap::serve::ArrivalSpacing::constant,
        42, 60.0, 2000);
    double last = 0.0;
    while (const auto t = process.next()) {
      check(std::isfinite(*t) && *t >= last && *t < 60.0, "an arrival out of order or outside [0, end)");
      last = *t;
    }
    check(process.produced() <= 2000, "more arrivals than max_count");
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  const auto choice = input.byte();
  const auto text = input.rest();
  if ((choice & 1U) == 0) {
    cap_schedule(text, (choice & 2U) != 0);
  } else {
    rate_schedule(text, (choice >> 1U) & 1U);
  }
  return 0;
}
