// `gpucap serve --cap-file F`: the text a node's power agent writes ("250", "250 W", {"watts": 250}),
// read at start and by the watcher (src/cli/cap_file_watcher.hpp) through serve::parse_cap_file,
// then set on the CapState as the watcher does. Input: the file's bytes.

#include <cmath>
#include <cstdint>

#include "fuzz_support.hpp"
#include "gpucap/serve/cap_state.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpucap::serve::CapState cap(gpucap::CapSchedule::constant(200.0), "flag", 100.0, 250.0);
  refusals_only([&] {
    const double watts = gpucap::serve::parse_cap_file(text, "cap.txt");
    check(std::isfinite(watts) && watts > 0.0, "parse_cap_file returned a cap that is not positive and finite");
    const bool taken = refusals_only([&] { cap.set(watts, "file", 1.0); });
    const auto reading = cap.at(2.0);
    check(reading.cap_w >= 100.0 && reading.cap_w <= 250.0, "a cap in force outside the GPU's range");
    check(!taken || reading.cap_w == watts, "a cap that was taken is not in force");
  });
  return 0;
}
