// `gpucap load --trace F`: the arrival times of a load (serve/arrivals: parse_arrival_trace), one
// time per line or CSV with a time_s column, then the arrival process over them as `gpucap load`
// runs it (bounded: 60 s, at most 10000 requests). Input: the file.

#include <cmath>
#include <cstdint>

#include "fuzz_support.hpp"
#include "gpucap/serve/arrivals.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace serve = gpucap::serve;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  refusals_only([&] {
    auto times = serve::parse_arrival_trace(text, "trace.csv");
    check(!times.empty(), "a trace without times");
    for (std::size_t i = 0; i < times.size(); ++i) {
      check(std::isfinite(times[i]) && times[i] >= 0.0 && (i == 0 || times[i] >= times[i - 1]), "a trace time out of order");
    }
    const auto arrivals = serve::all_arrivals(serve::ArrivalProcess::from_trace(std::move(times), 60.0, 10000));
    check(arrivals.size() <= 10000, "more arrivals than max_count");
    for (const double t : arrivals) check(t < 60.0, "an arrival after the end");
  });
  return 0;
}
