#pragma once
// Paths of the project's data, the shared measurements and test fixtures (set by CMake).

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace gpucap::test {

inline std::string data_dir() { return GPUCAP_TEST_DATA_DIR; }
inline std::string shared_data_dir() { return GPUCAP_TEST_SHARED_DATA_DIR; }
inline std::string fixture(const std::string& name) { return std::string(GPUCAP_TEST_FIXTURES_DIR) + "/" + name; }

// A test that needs a shared file fails loudly (never skips) when it is missing.
inline std::string shared_file(const std::string& relative) {
  const auto path = shared_data_dir() + "/" + relative;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "missing shared data file " << path << " (expected ../shared/data next to the repository)";
  }
  return path;
}

// A fresh temporary directory per test, removed at the end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string path() const { return path_.string(); }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `content` to DIR/name and returns its path.
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

}  // namespace gpucap::test
