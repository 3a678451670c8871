#pragma once
// Runs a gnuplot script (Debian's gnuplot-nox) that writes one plot file.

#include <string>

namespace gpucap {

// Pipes `script` into gnuplot. Throws Error(unsupported) if gnuplot cannot be started or fails,
// naming `output` (the file the script writes).
void run_gnuplot(const std::string& script, const std::string& output);

}  // namespace gpucap
