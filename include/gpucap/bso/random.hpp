#pragma once
// The optimizer's random stream. Its whole state is four 64-bit words that can be written to a
// database and read back, so a restarted server continues the same stream (Zeus keeps numpy's
// generator state for the same reason). Every draw is defined here — no std:: distribution,
// whose output differs between standard libraries — so decisions replay bit for bit anywhere.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::bso {

class BsoRandom {
 public:
  // xoshiro256** seeded through splitmix64 (Blackman & Vigna's recommended seeding).
  explicit BsoRandom(std::uint64_t seed);

  // "x256ss:<16 hex>:<16 hex>:<16 hex>:<16 hex>"; from_state throws Error(invalid_data) on
  // anything else (including the all-zero state, which the generator cannot leave).
  [[nodiscard]] std::string state() const;
  [[nodiscard]] static BsoRandom from_state(std::string_view text);

  std::uint64_t next();
  // Uniform in [0, 1), 53 random bits.
  double uniform();
  // Uniform whole number in [0, n); n > 0. Unbiased (rejection).
  std::uint64_t below(std::uint64_t n);
  // Normal(mean, stddev) by Box–Muller from two fresh uniforms (no cached second value, so the
  // state alone determines the next draw). stddev 0 returns mean.
  double normal(double mean, double stddev);
  // A uniformly random order of `values` (Fisher–Yates).
  [[nodiscard]] std::vector<int> permutation(std::vector<int> values);

 private:
  BsoRandom() = default;
  std::array<std::uint64_t, 4> s_{};
};

}  // namespace gpucap::bso
