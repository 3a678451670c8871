#include "gpucap/core/error.hpp"

#include <fmt/format.h>

namespace gpucap {

int exit_code(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::usage: return 2;
    case ErrorCode::invalid_data: return 3;
    case ErrorCode::io: return 4;
    case ErrorCode::unsupported: return 5;
    case ErrorCode::device: return 6;
    case ErrorCode::not_converged: return 7;
    case ErrorCode::no_gpu: return 8;
    case ErrorCode::interrupted: return 130;
    case ErrorCode::internal: return 70;
  }
  return 70;
}

const char* error_kind(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::usage: return "usage";
    case ErrorCode::invalid_data: return "invalid data";
    case ErrorCode::io: return "i/o";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::device: return "device";
    case ErrorCode::not_converged: return "not converged";
    case ErrorCode::no_gpu: return "no gpu";
    case ErrorCode::interrupted: return "interrupted";
    case ErrorCode::internal: return "internal";
  }
  return "internal";
}

Error data_error(const std::string& file, std::size_t line, const std::string& message) {
  if (line == 0) return Error(ErrorCode::invalid_data, fmt::format("{}: {}", file, message));
  return Error(ErrorCode::invalid_data, fmt::format("{}:{}: {}", file, line, message));
}

}  // namespace gpucap
