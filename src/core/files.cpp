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

#include <fcntl.h>
#include <unistd.h>

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

namespace {

void sync_or_throw(int fd, const std::string& what) {
  if (fsync(fd) != 0) {
    const int saved = errno;
    close(fd);
    throw Error(ErrorCode::io, fmt::format("{}: fsync failed ({})", what, std::strerror(saved)));
  }
  close(fd);
}

}  // namespace

void write_text_file_durably(const std::string& path, std::string_view content) {
  const std::string temporary = path + ".tmp";
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorCode::io, fmt::format("{}: cannot open for writing ({})", path, std::strerror(errno)));
  std::size_t written = 0;
  while (written < content.size()) {
    const auto n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      close(fd);
      std::remove(temporary.c_str());
      throw Error(ErrorCode::io, fmt::format("{}: write failed ({})", path, std::strerror(saved)));
    }
    written += static_cast<std::size_t>(n);
  }
  sync_or_throw(fd, temporary);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(temporary.c_str());
    throw Error(ErrorCode::io, fmt::format("{}: cannot write ({})", path, std::strerror(saved)));
  }
  const auto folder = std::filesystem::path(path).parent_path();
  const int dir_fd = open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) throw Error(ErrorCode::io, fmt::format("{}: cannot open its folder ({})", path, std::strerror(errno)));
  sync_or_throw(dir_fd, folder.string());
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
