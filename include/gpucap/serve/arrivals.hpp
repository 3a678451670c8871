#pragma once
// Request arrival processes: when the requests of a load arrive, in seconds from the start.
// `gpucap load` sends requests at these times over HTTP; a serving benchmark in virtual time
// feeds the same times to the twin, so both see the same load for the same seed.
//
// - Poisson at a rate, or at a rate that changes at given times ("0:50,30:100", like
//   --cap-schedule): a non-homogeneous Poisson process with a piecewise-constant rate, drawn
//   exactly by time change: each gap is an Exp(1) amount of "expected arrivals" (the integral of
//   the rate), carried across a change of rate (so a rate step does not restart the gap).
// - Constant spacing at the same rates (perf_analyzer's --request-distribution constant): the
//   same construction with every gap exactly one expected arrival; the first request at time 0.
// - A trace: the times read from a file (parse_arrival_trace).
//
// Pure: no clock, no I/O (the trace's text comes in as a string). Deterministic: the random
// stream is std::mt19937_64, whose sequence the C++ standard fixes, and the uniform and
// exponential transforms are ours (std:: distributions differ between standard libraries).
// Bounded: a process ends at its end time and after at most max_count arrivals, and produces
// its times one at a time, so a long run never holds them all.

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::serve {

struct RateStep {
  double time_s = 0.0;      // from the start of the run
  double rate_per_s = 0.0;  // requests per second from time_s until the next step

  bool operator==(const RateStep&) const = default;
};

class RateSchedule {
 public:
  // Error(usage) unless rate_per_s is positive and finite.
  [[nodiscard]] static RateSchedule constant(double rate_per_s);
  // Steps start at time 0 with strictly increasing finite times; rates are finite and >= 0 (0
  // pauses the load) and at least one is positive. Error(usage) naming the step otherwise.
  [[nodiscard]] static RateSchedule from_steps(std::vector<RateStep> steps);
  // "0:50,30:100" (seconds:requests per second). Error(usage) naming the bad part.
  [[nodiscard]] static RateSchedule parse(std::string_view text);

  [[nodiscard]] double rate_at(double time_s) const;
  // The expected number of arrivals in [0, end_s): the integral of the rate.
  [[nodiscard]] double expected_arrivals(double end_s) const;
  [[nodiscard]] const std::vector<RateStep>& steps() const { return steps_; }
  [[nodiscard]] bool is_constant() const { return steps_.size() == 1; }
  // "50/s" or "0:50,30:100".
  [[nodiscard]] std::string to_string() const;

 private:
  explicit RateSchedule(std::vector<RateStep> steps) : steps_(std::move(steps)) {}
  std::vector<RateStep> steps_;
};

enum class ArrivalSpacing { poisson, constant };

// "poisson" or "constant"; Error(usage) otherwise.
[[nodiscard]] ArrivalSpacing parse_arrival_spacing(std::string_view text);
[[nodiscard]] std::string_view to_string(ArrivalSpacing spacing) noexcept;

// The arrival times of a trace file's text: one time in seconds per line, or CSV whose header
// names a `time_s` column (other columns are ignored). Blank lines and lines starting with '#'
// are skipped. Times are finite, >= 0 and non-decreasing; at least one. Error(invalid_data)
// "SOURCE:LINE: ..." otherwise (source_name is the file's name, for the message). Every line is
// checked, and the first `max_times` times are kept (a run sends no more than that many): the
// memory is 8 bytes per time kept, whatever the file's length.
[[nodiscard]] std::vector<double> parse_arrival_trace(std::string_view text, std::string_view source_name,
                                                      std::size_t max_times = std::numeric_limits<std::size_t>::max());

class ArrivalProcess {
 public:
  // Arrivals at `schedule`'s rate in [0, end_s), at most max_count. Error(usage) for an end that
  // is not positive and finite.
  [[nodiscard]] static ArrivalProcess from_schedule(RateSchedule schedule, ArrivalSpacing spacing,
                                                    std::uint64_t seed, double end_s, std::uint64_t max_count);
  // The trace's times (non-decreasing, >= 0, as parse_arrival_trace returns them) that are below
  // end_s, at most max_count. Error(usage) for times that are not so, or a bad end.
  [[nodiscard]] static ArrivalProcess from_trace(std::vector<double> times_s, double end_s, std::uint64_t max_count);

  // The next arrival time, never earlier than the one before; nullopt once the process ended.
  [[nodiscard]] std::optional<double> next();
  // How many arrivals next() has returned.
  [[nodiscard]] std::uint64_t produced() const { return produced_; }
  [[nodiscard]] double end_s() const { return end_s_; }

 private:
  ArrivalProcess() = default;
  [[nodiscard]] std::optional<double> next_scheduled();
  [[nodiscard]] double draw_gap();

  // Schedule-driven
  std::optional<RateSchedule> schedule_;
  ArrivalSpacing spacing_ = ArrivalSpacing::poisson;
  std::mt19937_64 engine_;
  std::size_t step_ = 0;
  double step_start_expected_ = 0.0;  // expected arrivals before steps[step_] begins
  double target_ = 0.0;               // expected arrivals before the latest arrival
  bool first_ = true;
  // Trace-driven
  std::vector<double> trace_s_;
  std::size_t trace_next_ = 0;

  double end_s_ = 0.0;
  std::uint64_t max_count_ = 0;
  std::uint64_t produced_ = 0;
  bool ended_ = false;
};

// Every arrival of `process` (for tests and virtual-time benchmarks; bounded by its max_count).
[[nodiscard]] std::vector<double> all_arrivals(ArrivalProcess process);

}  // namespace gpucap::serve
