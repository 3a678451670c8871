#include "gpucap/engine/sim_engine.hpp"

#include <fmt/format.h>

namespace gpucap::engine {

std::string SimEngine::name() const {
  return fmt::format("twin:{} ({})", twin_.model().id, sim::to_string(twin_.precision()));
}

BatchResult SimEngine::run_batch(int batch_size) {
  const auto record = twin_.run_batch(batch_size);
  return BatchResult{batch_size, record.start_s, record.end_s};
}

}  // namespace gpucap::engine
