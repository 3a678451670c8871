#include "gpucap/runtime/pacer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::runtime {
namespace {

constexpr double kMinPace = 0.01;
constexpr double kMaxPace = 10000.0;

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sleep_s(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

}  // namespace

double parse_pace(const std::string& text) {
  if (text == "realtime") return 1.0;
  const auto factor = parse_double(text);
  if (!factor || !(*factor >= kMinPace && *factor <= kMaxPace)) {
    throw usage_error(fmt::format("--pace '{}' must be 'realtime' or a speed factor from {:g} to {:g} (virtual seconds "
                                  "per wall second)",
                                  text, kMinPace, kMaxPace));
  }
  return *factor;
}

Pacer::Pacer(double factor, WallClock wall, Sleep sleep)
    : factor_(factor), wall_(wall ? std::move(wall) : WallClock(steady_now_s)), sleep_(sleep ? std::move(sleep) : Sleep(sleep_s)) {
  if (!(factor_ > 0.0)) throw usage_error("the pace must be > 0");
}

void Pacer::wait_until(double virtual_s) {
  if (!virtual_origin_s_) {
    virtual_origin_s_ = virtual_s;
    wall_origin_s_ = wall_();
    return;
  }
  const double due_wall_s = wall_origin_s_ + (virtual_s - *virtual_origin_s_) / factor_;
  const double ahead_s = due_wall_s - wall_();
  if (ahead_s > 0.0) sleep_(ahead_s);
}

PacedEngine::PacedEngine(engine::Engine& inner, std::function<double()> virtual_now_s, Pacer pacer)
    : inner_(inner), virtual_now_s_(std::move(virtual_now_s)), pacer_(std::move(pacer)) {}

engine::BatchResult PacedEngine::run_batch(int batch_size) {
  pacer_.wait_until(virtual_now_s_());  // the first batch sets the origin; later ones catch up
  auto result = inner_.run_batch(batch_size);
  pacer_.wait_until(virtual_now_s_());
  return result;
}

engine::BatchResult PacedEngine::run_tenants(const std::vector<TenantKnobs>& tenants) {
  pacer_.wait_until(virtual_now_s_());
  auto result = inner_.run_tenants(tenants);
  pacer_.wait_until(virtual_now_s_());
  return result;
}

}  // namespace gpucap::runtime
