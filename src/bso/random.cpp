#include "gpucap/bso/random.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <numbers>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::bso {
namespace {

constexpr std::string_view kStatePrefix = "x256ss";

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

BsoRandom::BsoRandom(std::uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

std::string BsoRandom::state() const {
  return fmt::format("{}:{:016x}:{:016x}:{:016x}:{:016x}", kStatePrefix, s_[0], s_[1], s_[2], s_[3]);
}

BsoRandom BsoRandom::from_state(std::string_view text) {
  const auto bad = [&] { return Error(ErrorCode::invalid_data, fmt::format("not a random-generator state: '{}'", text)); };
  const auto parts = split(text, ':');
  if (parts.size() != 5 || parts[0] != kStatePrefix) throw bad();
  BsoRandom rng;
  for (std::size_t i = 0; i < 4; ++i) {
    const auto word = parts[i + 1];
    if (word.size() != 16) throw bad();
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), rng.s_[i], 16);
    if (ec != std::errc{} || end != word.data() + word.size()) throw bad();
  }
  if (rng.s_[0] == 0 && rng.s_[1] == 0 && rng.s_[2] == 0 && rng.s_[3] == 0) throw bad();
  return rng;
}

std::uint64_t BsoRandom::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double BsoRandom::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::uint64_t BsoRandom::below(std::uint64_t n) {
  if (n == 0) throw Error(ErrorCode::internal, "BsoRandom::below(0)");
  // Reject the top partial bucket so every residue is equally likely.
  const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
  std::uint64_t x = next();
  while (x >= limit) x = next();
  return x % n;
}

double BsoRandom::normal(double mean, double stddev) {
  double u1 = uniform();
  const double u2 = uniform();
  if (u1 <= 0.0) u1 = 0x1.0p-53;  // log(0) would be -inf
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  if (stddev == 0.0) return mean;
  return mean + stddev * z;
}

std::vector<int> BsoRandom::permutation(std::vector<int> values) {
  for (std::size_t i = values.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(below(i));
    std::swap(values[i - 1], values[j]);
  }
  return values;
}

}  // namespace gpucap::bso
