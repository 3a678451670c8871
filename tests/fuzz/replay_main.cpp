// The replay driver of the normal build: runs a fuzz target's LLVMFuzzerTestOneInput on every file
// of the directories (or files) given, as libFuzzer would run its corpus, so that CI replays every
// seed and every crash ever found with whatever compiler it uses. A finding aborts (the target's
// own checks, an uncaught exception, a sanitizer where one is built in); the test then fails and
// names the file it was running.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputs_of(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_regular_file(path)) {
    files.push_back(path);
  } else if (std::filesystem::is_directory(path)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
      if (entry.is_regular_file() && entry.path().filename().string() != "README.md") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

// replay [--require] DIR_OR_FILE...: --require makes a missing or empty first argument an error
// (the seed corpus must exist; a target's regressions folder may not yet).
int main(int argc, char** argv) {
  int first = 1;
  bool require = false;
  if (argc > 1 && std::string(argv[1]) == "--require") {
    require = true;
    first = 2;
  }
  std::size_t total = 0;
  for (int i = first; i < argc; ++i) {
    const auto files = inputs_of(argv[i]);
    if (files.empty() && require && i == first) {
      std::fprintf(stderr, "replay: no inputs in %s\n", argv[i]);
      return 2;
    }
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
        return 2;
      }
      std::fprintf(stderr, "replay: %s\n", file.c_str());
      (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++total;
    }
    std::fprintf(stderr, "replay: %s: %zu input(s)\n", argv[i], files.size());
  }
  std::printf("replay: %zu input(s) ran without a finding\n", total);
  return 0;
}
