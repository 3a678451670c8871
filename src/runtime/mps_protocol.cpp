#include "gpucap/runtime/mps_protocol.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::runtime {

namespace {

using nlohmann::json;

// At most this much of a bad line goes into an error message.
constexpr std::size_t kQuotedBytes = 80;

Error bad_line(std::string_view line, const std::string& why) {
  const auto shown = line.substr(0, kQuotedBytes);
  return Error(ErrorCode::invalid_data,
               fmt::format("{}: '{}{}'", why, shown, line.size() > kQuotedBytes ? "…" : ""));
}

json parse_object(std::string_view line) {
  json object;
  try {
    object = json::parse(line);
  } catch (const json::exception&) {
    throw bad_line(line, "not JSON");
  }
  if (!object.is_object()) throw bad_line(line, "not a JSON object");
  return object;
}

const json& field(const json& object, const char* name, std::string_view line) {
  const auto found = object.find(name);
  if (found == object.end()) throw bad_line(line, fmt::format("no \"{}\"", name));
  return *found;
}

long long whole_number(const json& object, const char* name, std::string_view line, long long min, long long max) {
  const auto& value = field(object, name, line);
  if (!value.is_number_integer()) throw bad_line(line, fmt::format("\"{}\" is not a whole number", name));
  const auto number = value.get<long long>();
  if (number < min || number > max) {
    throw bad_line(line, fmt::format("\"{}\" {} is not between {} and {}", name, number, min, max));
  }
  return number;
}

double finite_number(const json& object, const char* name, std::string_view line, double min) {
  const auto& value = field(object, name, line);
  if (!value.is_number()) throw bad_line(line, fmt::format("\"{}\" is not a number", name));
  const auto number = value.get<double>();
  if (!std::isfinite(number) || number < min) throw bad_line(line, fmt::format("\"{}\" {} is below {}", name, number, min));
  return number;
}

std::string text_field(const json& object, const char* name, std::string_view line) {
  const auto& value = field(object, name, line);
  if (!value.is_string()) throw bad_line(line, fmt::format("\"{}\" is not a string", name));
  return value.get<std::string>();
}

constexpr long long kMaxBatch = 1 << 20;

}  // namespace

std::string encode(const MpsCommand& command) {
  json object;
  if (command.kind == MpsCommand::Kind::run) {
    object = {{"cmd", "run"}, {"batch", command.batch}, {"warmup_s", command.warmup_s}, {"measure_s", command.measure_s}};
  } else {
    object = {{"cmd", "quit"}};
  }
  return object.dump() + "\n";
}

std::string encode(const MpsMessage& message) {
  json object;
  switch (message.kind) {
    case MpsMessage::Kind::ready:
      object = {{"type", "ready"},
                {"share_pct", message.share_pct ? json(*message.share_pct) : json()},
                {"engine", message.engine}};
      break;
    case MpsMessage::Kind::result:
      object = {{"type", "result"}, {"images", message.images}, {"seconds", message.seconds}, {"batch", message.batch}};
      break;
    case MpsMessage::Kind::error:
      object = {{"type", "error"}, {"message", message.message}};
      break;
  }
  // Invalid UTF-8 in an engine's error text must not make the worker fail to report it.
  return object.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

MpsCommand parse_mps_command(std::string_view line) {
  const auto object = parse_object(line);
  const auto cmd = text_field(object, "cmd", line);
  MpsCommand command;
  if (cmd == "quit") return command;
  if (cmd != "run") throw bad_line(line, fmt::format("unknown command '{}'", cmd));
  command.kind = MpsCommand::Kind::run;
  command.batch = static_cast<int>(whole_number(object, "batch", line, 1, kMaxBatch));
  command.warmup_s = finite_number(object, "warmup_s", line, 0.0);
  command.measure_s = finite_number(object, "measure_s", line, 0.0);
  if (command.measure_s <= 0.0) throw bad_line(line, "\"measure_s\" must be > 0");
  return command;
}

MpsMessage parse_mps_message(std::string_view line) {
  const auto object = parse_object(line);
  const auto type = text_field(object, "type", line);
  MpsMessage message;
  if (type == "ready") {
    message.kind = MpsMessage::Kind::ready;
    const auto& share = field(object, "share_pct", line);
    if (!share.is_null()) message.share_pct = static_cast<int>(whole_number(object, "share_pct", line, 0, 100));
    if (object.contains("engine")) message.engine = text_field(object, "engine", line);
  } else if (type == "result") {
    message.kind = MpsMessage::Kind::result;
    message.images = whole_number(object, "images", line, 0, std::numeric_limits<long long>::max());
    message.seconds = finite_number(object, "seconds", line, 0.0);
    message.batch = static_cast<int>(whole_number(object, "batch", line, 1, kMaxBatch));
  } else if (type == "error") {
    message.kind = MpsMessage::Kind::error;
    message.message = text_field(object, "message", line);
  } else {
    throw bad_line(line, fmt::format("unknown message type '{}'", type));
  }
  return message;
}

std::optional<int> mps_share_from_environment() {
  const char* value = std::getenv(kMpsShareEnv);
  if (value == nullptr) return std::nullopt;
  const auto share = parse_integer(value);
  if (!share || *share < 0 || *share > 100) return std::nullopt;
  return static_cast<int>(*share);
}

LineReader::Status LineReader::next(double deadline_s, std::string* line) {
  while (!take_line(line)) {
    const double left_s = deadline_s - steady_now_s();
    if (left_s <= 0.0) return Status::timeout;
    constexpr double kLongestPollMs = 1e9;  // poll's timeout is an int of milliseconds
    const int timeout_ms = std::isinf(left_s) ? -1 : static_cast<int>(std::min(std::ceil(left_s * 1000.0), kLongestPollMs));
    pollfd entry{fd_, POLLIN, 0};
    const int ready = poll(&entry, 1, timeout_ms);
    if (ready < 0 && errno != EINTR) return Status::closed;
    if (ready > 0 && !fill()) {
      // What came before the end is still a line if it ends with one.
      return take_line(line) ? Status::line : Status::closed;
    }
  }
  return Status::line;
}

bool LineReader::has_line() const { return buffer_.find('\n') != std::string::npos; }

bool LineReader::fill() {
  char chunk[4096];
  while (true) {
    const ssize_t got = read(fd_, chunk, sizeof chunk);
    if (got > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(got));
      if (!has_line() && buffer_.size() > kMpsMaxLineBytes) {
        throw bad_line(buffer_, fmt::format("a line longer than {} bytes", kMpsMaxLineBytes));
      }
      return true;
    }
    if (got == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

bool LineReader::take_line(std::string* line) {
  const auto end = buffer_.find('\n');
  if (end == std::string::npos) return false;
  line->assign(buffer_, 0, end);
  buffer_.erase(0, end + 1);
  return true;
}

bool write_all(int fd, std::string_view text) noexcept {
  while (!text.empty()) {
    ssize_t wrote = send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (wrote < 0 && errno == ENOTSOCK) wrote = write(fd, text.data(), text.size());
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(wrote));
  }
  return true;
}

}  // namespace gpucap::runtime
