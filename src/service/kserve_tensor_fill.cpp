#include "kserve_tensor_fill.hpp"

// An input's data to tensor bytes; the request parser is kserve_protocol.cpp.

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

namespace gpucap::service::kserve::detail {

using nlohmann::json;

static_assert(sizeof(bool) == 1, "BOOL elements are written as C++ bools of one byte");

std::string excerpt(const json& value) {
  if (value.is_array() || value.is_object()) return std::string("an ") + value.type_name();
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    // As the client wrote it (nlohmann would write null).
    const double number = value.get<double>();
    return std::isnan(number) ? "NaN" : (number > 0 ? "Infinity" : "-Infinity");
  }
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr std::size_t kMaxChars = 40;
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars - 3) + "...";
  return text;
}

namespace {

ProtocolError bad_request(const std::string& message) { return ProtocolError(kBadRequest, message); }

// --- JSON elements to tensor bytes ---

template <typename T>
bool to_element(const json& value, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) return false;
    out = value.get<bool>();
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    // Integers only: 2.0 or 1e3 for an INT32 is refused, as Triton's AsInt/AsUInt refuse it.
    if (value.is_number_unsigned()) {
      const auto u = value.get_ref<const json::number_unsigned_t&>();
      if (!std::in_range<T>(u)) return false;
      out = static_cast<T>(u);
      return true;
    }
    if (value.is_number_integer()) {
      const auto s = value.get_ref<const json::number_integer_t&>();
      if (!std::in_range<T>(s)) return false;
      out = static_cast<T>(s);
      return true;
    }
    return false;
  } else {
    if (!value.is_number()) return false;
    // Not finite only when the client wrote NaN or Infinity (parse_json_header): the parser refuses
    // a number that overflows a double (1e999), and a finite one beyond a float's range is refused here.
    const double number = value.get<double>();
    if constexpr (std::is_same_v<T, float>) {
      if (std::isfinite(number) && std::abs(number) > static_cast<double>(std::numeric_limits<float>::max())) {
        return false;
      }
    }
    out = static_cast<T>(number);
    return true;
  }
}

template <typename T>
std::string expected_element(Datatype datatype) {
  if constexpr (std::is_same_v<T, bool>) {
    return "true or false (BOOL)";
  } else if constexpr (std::is_integral_v<T>) {
    return fmt::format("an integer in [{}, {}] ({})", +std::numeric_limits<T>::min(), +std::numeric_limits<T>::max(),
                       to_string(datatype));
  } else {
    return fmt::format("a number within {} range", to_string(datatype));
  }
}

template <typename Visit>
void for_each_leaf(const json& node, Visit& visit) {
  if (!node.is_array()) {
    visit(node);
    return;
  }
  for (const auto& element : node) for_each_leaf(element, visit);  // depth bounded by check_json_depth
}

std::uint64_t count_leaves(const json& node) {
  if (!node.is_array()) return 1;
  std::uint64_t count = 0;
  for (const auto& element : node) count += count_leaves(element);
  return count;
}

template <typename T>
void fill_fixed_from_json(Tensor& tensor, const json& data, std::size_t count) {
  tensor.data.resize(count * sizeof(T));
  std::byte* out = tensor.data.data();
  std::size_t index = 0;
  auto write = [&](const json& value) {
    T element{};
    if (!to_element(value, element)) {
      throw bad_request(fmt::format("input '{}' element {}: {} is not {}", tensor.name, index, excerpt(value),
                                    expected_element<T>(tensor.datatype)));
    }
    std::memcpy(out + index * sizeof(T), &element, sizeof(T));
    ++index;
  };
  for_each_leaf(data, write);
}

void fill_bytes_from_json(Tensor& tensor, const json& data) {
  std::size_t total_bytes = 0;
  std::size_t index = 0;
  auto measure = [&](const json& value) {
    if (!value.is_string()) {
      throw bad_request(
          fmt::format("input '{}' element {}: {} is not a string (BYTES)", tensor.name, index, excerpt(value)));
    }
    total_bytes += 4 + value.get_ref<const std::string&>().size();
    ++index;
  };
  for_each_leaf(data, measure);
  tensor.data.reserve(total_bytes);
  auto append = [&](const json& value) { append_bytes_element(tensor.data, value.get_ref<const std::string&>()); };
  for_each_leaf(data, append);
}

}  // namespace

void fill_from_json(Tensor& tensor, const json& data, std::uint64_t count) {
  if (tensor.datatype == Datatype::fp16 || tensor.datatype == Datatype::bf16) {
    throw bad_request(
        fmt::format("{} input '{}' cannot be sent as JSON; send it as binary data "
                    "(parameters.binary_data_size)",
                    to_string(tensor.datatype), tensor.name));
  }
  if (!data.is_array()) throw bad_request(fmt::format("'data' of input '{}' must be an array", tensor.name));
  // Count before allocating: the shape alone must never size an allocation (a shape of
  // [1, 10^12] with three values is a 400, not an attempt at 4 TB).
  const auto leaves = count_leaves(data);
  if (leaves != count) {
    throw bad_request(fmt::format("input '{}' has shape {} ({} elements) but 'data' holds {}", tensor.name,
                                  shape_string(tensor.shape), count, leaves));
  }
  const auto n = static_cast<std::size_t>(count);
  switch (tensor.datatype) {
    case Datatype::boolean:
      return fill_fixed_from_json<bool>(tensor, data, n);
    case Datatype::uint8:
      return fill_fixed_from_json<std::uint8_t>(tensor, data, n);
    case Datatype::uint16:
      return fill_fixed_from_json<std::uint16_t>(tensor, data, n);
    case Datatype::uint32:
      return fill_fixed_from_json<std::uint32_t>(tensor, data, n);
    case Datatype::uint64:
      return fill_fixed_from_json<std::uint64_t>(tensor, data, n);
    case Datatype::int8:
      return fill_fixed_from_json<std::int8_t>(tensor, data, n);
    case Datatype::int16:
      return fill_fixed_from_json<std::int16_t>(tensor, data, n);
    case Datatype::int32:
      return fill_fixed_from_json<std::int32_t>(tensor, data, n);
    case Datatype::int64:
      return fill_fixed_from_json<std::int64_t>(tensor, data, n);
    case Datatype::fp32:
      return fill_fixed_from_json<float>(tensor, data, n);
    case Datatype::fp64:
      return fill_fixed_from_json<double>(tensor, data, n);
    case Datatype::bytes:
      return fill_bytes_from_json(tensor, data);
    case Datatype::fp16:
    case Datatype::bf16:
      break;  // refused above
  }
}

void fill_from_binary(Tensor& tensor, std::string_view chunk, std::uint64_t count) {
  const auto* first = reinterpret_cast<const std::byte*>(chunk.data());
  const std::span<const std::byte> bytes(first, chunk.size());
  if (tensor.datatype == Datatype::bytes) {
    std::size_t elements = 0;
    try {
      elements = bytes_elements(bytes).size();
    } catch (const ProtocolError& e) {
      throw bad_request(fmt::format("input '{}': {}", tensor.name, e.what()));
    }
    if (elements != count) {
      throw bad_request(fmt::format("BYTES input '{}' has shape {} ({} elements) but its binary data holds {}",
                                    tensor.name, shape_string(tensor.shape), count, elements));
    }
  } else {
    const auto size = element_size_bytes(tensor.datatype);
    if (chunk.size() % size != 0) {
      throw bad_request(
          fmt::format("binary_data_size {} of input '{}' is not a multiple of the {} element size ({} bytes)",
                      chunk.size(), tensor.name, to_string(tensor.datatype), size));
    }
    if (chunk.size() / size != count) {
      throw bad_request(fmt::format(
          "input '{}' has shape {} ({} elements) but binary_data_size {} holds {} {} elements", tensor.name,
          shape_string(tensor.shape), count, chunk.size(), chunk.size() / size, to_string(tensor.datatype)));
    }
    if (tensor.datatype == Datatype::boolean) {
      // A byte other than 0 or 1 read as a C++ bool downstream is undefined behaviour.
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (std::to_integer<unsigned>(bytes[i]) > 1) {
          throw bad_request(fmt::format("BOOL input '{}' element {} is byte {}; BOOL elements are 0 or 1", tensor.name,
                                        i, std::to_integer<unsigned>(bytes[i])));
        }
      }
    }
  }
  tensor.data.assign(bytes.begin(), bytes.end());
}

}  // namespace gpucap::service::kserve::detail
