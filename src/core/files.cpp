#include "gpucap/core/files.hpp"
#include "gpucap/core/atomic_file.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
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

namespace {

// The process's own standard output or error, if `path` names the file behind it (/dev/stdout
// with stdout redirected to a file, say); -1 otherwise.
int standard_stream_of(const std::string& path) {
  struct stat named {};
  if (stat(path.c_str(), &named) != 0) return -1;
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat open_file {};
    if (fstat(fd, &open_file) == 0 && open_file.st_dev == named.st_dev && open_file.st_ino == named.st_ino) return fd;
  }
  return -1;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, Durability durability, Unfinished unfinished)
    : path_(std::move(path)), durability_(durability), unfinished_(unfinished) {
  // Written through the process's own descriptor: it shares the file's offset with what the
  // process prints there (opened anew, the file would be replaced or written over from 0).
  if (const int stream = standard_stream_of(path_); stream >= 0) {
    fd_ = fcntl(stream, F_DUPFD_CLOEXEC, 0);
    if (fd_ < 0) throw Error(ErrorCode::io, fmt::format("{}: cannot open for writing ({})", path_, std::strerror(errno)));
    direct_ = true;
    return;
  }
  std::error_code ec;
  const auto status = std::filesystem::status(path_, ec);
  target_existed_ = !ec && std::filesystem::exists(status);
  if (target_existed_ && !std::filesystem::is_regular_file(status)) {
    // A terminal, a pipe, /dev/null: written straight through; there is nothing to replace.
    fd_ = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorCode::io, fmt::format("{}: cannot open for writing ({})", path_, std::strerror(errno)));
    direct_ = true;
    target_existed_ = false;
    return;
  }
  // Through a symbolic link, the file it names is the one replaced (the link stays).
  target_ = std::filesystem::is_symlink(std::filesystem::symlink_status(path_, ec)) && target_existed_
                ? std::filesystem::canonical(path_, ec).string()
                : path_;
  if (target_.empty()) target_ = path_;
  std::string pattern = target_ + ".partial-XXXXXX";
  fd_ = mkostemp(pattern.data(), O_CLOEXEC);
  if (fd_ < 0) {
    throw Error(ErrorCode::io, fmt::format("{}: cannot open for writing ({})", path_, std::strerror(errno)));
  }
  temporary_ = std::move(pattern);
  // mkostemp makes the file private (0600); the target is readable as files gpucap writes were.
  fchmod(fd_, 0644);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (done_) return;
  if (fd_ >= 0) close(fd_);
  if (direct_) return;
  if (unfinished_ == Unfinished::keep && bytes_ > 0) {
    spdlog::warn("{} was not finished: what was written so far is in {}{}", path_, temporary_,
                 target_existed_ ? fmt::format(", and {} is unchanged", path_) : std::string());
    return;
  }
  unlink(temporary_.c_str());
}

void AtomicFileWriter::fail(const char* what, int error) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (!direct_) unlink(temporary_.c_str());
  done_ = true;
  throw Error(ErrorCode::io, fmt::format("{}: {} ({}){}", path_, what, std::strerror(error),
                                         target_existed_ ? "; the previous file is unchanged" : ""));
}

void AtomicFileWriter::write(std::string_view text) {
  if (done_) throw Error(ErrorCode::internal, fmt::format("{}: written after it was finished", path_));
  std::size_t written = 0;
  while (written < text.size()) {
    const auto n = ::write(fd_, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write", n < 0 ? errno : ENOSPC);
    written += static_cast<std::size_t>(n);
  }
  bytes_ += written;
}

void AtomicFileWriter::commit() {
  if (done_) throw Error(ErrorCode::internal, fmt::format("{}: finished twice", path_));
  if (durability_ == Durability::sync && !direct_ && fsync(fd_) != 0) fail("cannot write (fsync)", errno);
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) fail("cannot write (close)", errno);
  if (direct_) {
    done_ = true;
    return;
  }
  if (std::rename(temporary_.c_str(), target_.c_str()) != 0) fail("cannot replace", errno);
  done_ = true;
  if (durability_ == Durability::sync) {
    const auto folder = std::filesystem::path(target_).parent_path();
    const int dir_fd = open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) throw Error(ErrorCode::io, fmt::format("{}: cannot open its folder ({})", path_, std::strerror(errno)));
    const bool synced = fsync(dir_fd) == 0;
    const int saved = errno;
    close(dir_fd);
    if (!synced) throw Error(ErrorCode::io, fmt::format("{}: cannot sync its folder ({})", path_, std::strerror(saved)));
  }
}

void write_text_file(const std::string& path, std::string_view content) {
  AtomicFileWriter out(path, AtomicFileWriter::Durability::flush);
  out.write(content);
  out.commit();
}

void write_text_file_durably(const std::string& path, std::string_view content) {
  AtomicFileWriter out(path, AtomicFileWriter::Durability::sync);
  out.write(content);
  out.commit();
}

void write_text_files(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::unique_ptr<AtomicFileWriter>> writers;
  for (const auto& [path, text] : files) {
    writers.push_back(std::make_unique<AtomicFileWriter>(path, AtomicFileWriter::Durability::flush));
    writers.back()->write(text);
  }
  for (auto& writer : writers) writer->commit();
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
