#include "gpucap/service/kserve_protocol.hpp"

// Triton's classification extension (docs/protocol/extension_classification.md). Where the
// document is silent, this follows what Triton's server does (src/classification.cc and the
// response writer in src/http_server.cc): the value is written with std::to_string, the class
// count is cut to the elements of an item, and an item of more than a million elements is refused.
// Unlike Triton's std::sort, the order is total (equal values by index, NaN last), so one answer
// is always the same.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace gpucap::service::kserve {
namespace {

template <typename T>
std::string class_value_text(T value) {
  // std::to_string, as Triton: "%f" for floating point, decimal for integers (an INT8 as a number).
  if constexpr (std::is_floating_point_v<T>) {
    return std::to_string(value);
  } else {
    return std::to_string(+value);
  }
}

// Appends the top `count` classes of one item (`item` holds its elements) as BYTES elements.
template <typename T>
void append_top_classes(std::vector<std::byte>& out, std::span<const std::byte> item, std::size_t count) {
  std::vector<T> values(item.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), item.data(), values.size() * sizeof(T));
  const auto higher = [&values](std::size_t a, std::size_t b) {
    const T va = values[a];
    const T vb = values[b];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(va) || std::isnan(vb)) return !std::isnan(va) || (std::isnan(vb) && a < b);
    }
    return va > vb || (va == vb && a < b);
  };
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto top = order.begin() + static_cast<std::ptrdiff_t>(count);
  std::partial_sort(order.begin(), top, order.end(), higher);
  for (auto it = order.begin(); it != top; ++it) {
    append_bytes_element(out, class_value_text(values[*it]) + ":" + std::to_string(*it));
  }
}

void append_top_classes(std::vector<std::byte>& out, Datatype datatype, std::span<const std::byte> item,
                        std::size_t count) {
  switch (datatype) {
    case Datatype::uint8:
      return append_top_classes<std::uint8_t>(out, item, count);
    case Datatype::uint16:
      return append_top_classes<std::uint16_t>(out, item, count);
    case Datatype::uint32:
      return append_top_classes<std::uint32_t>(out, item, count);
    case Datatype::uint64:
      return append_top_classes<std::uint64_t>(out, item, count);
    case Datatype::int8:
      return append_top_classes<std::int8_t>(out, item, count);
    case Datatype::int16:
      return append_top_classes<std::int16_t>(out, item, count);
    case Datatype::int32:
      return append_top_classes<std::int32_t>(out, item, count);
    case Datatype::int64:
      return append_top_classes<std::int64_t>(out, item, count);
    case Datatype::fp32:
      return append_top_classes<float>(out, item, count);
    case Datatype::fp64:
      return append_top_classes<double>(out, item, count);
    case Datatype::boolean:
    case Datatype::fp16:
    case Datatype::bf16:
    case Datatype::bytes:
      break;
  }
  throw ProtocolError(kInternalError, fmt::format("{} outputs cannot be classified", to_string(datatype)));
}

}  // namespace

bool classifiable(Datatype datatype) noexcept {
  switch (datatype) {
    case Datatype::boolean:
    case Datatype::fp16:
    case Datatype::bf16:
    case Datatype::bytes:
      return false;
    default:
      return true;
  }
}

Tensor classify_output(const Tensor& output, std::uint32_t class_count, bool batched, std::size_t max_bytes) {
  if (!classifiable(output.datatype)) {
    // Triton's words for it, with the output's name.
    throw ProtocolError(kBadRequest, fmt::format("class result not available for output '{}' due to unsupported type '{}'",
                                                 output.name, to_string(output.datatype)));
  }
  check_tensor_data(output, kInternalError);
  const bool per_batch = batched && !output.shape.empty();
  const std::span<const std::int64_t> item_dims(output.shape.begin() + (per_batch ? 1 : 0), output.shape.end());
  const std::uint64_t item_elements = element_count(item_dims).value_or(0);
  if (item_elements > kMaxClassificationElements) {
    throw ProtocolError(kBadRequest, fmt::format("output '{}': classification output tensor too large ({} elements per "
                                                 "item; at most {})",
                                                 output.name, item_elements, kMaxClassificationElements));
  }
  const std::int64_t items = per_batch ? output.shape.front() : 1;
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(class_count, item_elements));
  const std::size_t item_bytes = static_cast<std::size_t>(item_elements) * element_size_bytes(output.datatype);

  Tensor classes{output.name, Datatype::bytes, {}, {}};
  if (per_batch) classes.shape.push_back(items);
  classes.shape.push_back(static_cast<std::int64_t>(count));
  const std::span<const std::byte> data(output.data);
  for (std::int64_t i = 0; i < items; ++i) {
    append_top_classes(classes.data, output.datatype, data.subspan(static_cast<std::size_t>(i) * item_bytes, item_bytes),
                       count);
    if (classes.data.size() > max_bytes) {
      throw ProtocolError(kBadRequest, fmt::format("output '{}': its classes would take more than {} bytes; ask for fewer",
                                                   output.name, max_bytes));
    }
  }
  return classes;
}

}  // namespace gpucap::service::kserve
