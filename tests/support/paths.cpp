#include "support/paths.hpp"

#include <cstdlib>
#include <fstream>

namespace gpucap::test {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "gpucap-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  const auto path = path_ / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

}  // namespace gpucap::test
