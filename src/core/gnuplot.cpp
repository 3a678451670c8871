#include "gpucap/core/gnuplot.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "gpucap/core/error.hpp"

namespace gpucap {

void run_gnuplot(const std::string& script, const std::string& output) {
  FILE* gnuplot = popen("gnuplot 2>&1", "w");
  if (gnuplot == nullptr) throw Error(ErrorCode::unsupported, "cannot start gnuplot (install gnuplot-nox)");
  std::fwrite(script.data(), 1, script.size(), gnuplot);
  const int status = pclose(gnuplot);
  if (status != 0) {
    throw Error(ErrorCode::unsupported,
                fmt::format("gnuplot failed writing {} (exit status {}); is gnuplot-nox installed?", output, status));
  }
}

}  // namespace gpucap
