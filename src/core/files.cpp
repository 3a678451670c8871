#include "gpucap/core/files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpucap/core/error.hpp"

namespace gpucap {

std::string read_text_file(const std::string& path) {
  // Data files are small (the largest shipped one is ~1 MB); the cap keeps a wrong path such as
  // /dev/zero from exhausting memory.
  constexpr std::uintmax_t kMaxBytes = 256ull << 20;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw Error(ErrorCode::io, fmt::format("{}: not a regular file", path));
  }
  if (!ec && std::filesystem::is_regular_file(status) && std::filesystem::file_size(path, ec) > kMaxBytes) {
    throw Error(ErrorCode::io, fmt::format("{}: larger than {} MiB", path, kMaxBytes >> 20));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::io, fmt::format("{}: cannot open for reading ({})", path, std::strerror(errno)));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::io, fmt::format("{}: read failed", path));
  return content.str();
}

void write_text_file(const std::string& path, std::string_view content) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw Error(ErrorCode::io, fmt::format("{}: cannot open for writing ({})", path, std::strerror(errno)));
    }
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      throw Error(ErrorCode::io, fmt::format("{}: write failed", path));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(temporary.c_str());
    throw Error(ErrorCode::io, fmt::format("{}: cannot write ({})", path, std::strerror(saved)));
  }
}

std::vector<std::string> list_files(const std::string& dir, std::string_view extension) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw Error(ErrorCode::io, fmt::format("{}: not a folder", dir));
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == extension) files.push_back(entry.path().string());
  }
  if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot list ({})", dir, ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace gpucap
