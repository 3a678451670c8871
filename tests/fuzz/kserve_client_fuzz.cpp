// `gpucap load`'s inputs from outside: the server's model metadata (GET v2/models/{m}, parsed by
// service/kserve_client: parse_model_metadata), its error answers (error_message_of) and --shape.
// A metadata answer that parses is used as `gpucap load` uses it: request inputs made for it,
// encoded as JSON or binary; and when it describes a model `gpucap serve` could serve, the
// server's parser must take what the load generator sends for it (client and server agree).
// Input: byte 0 picks the part (metadata, error answer); for metadata, a --shape line, then the
// body.

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "gpucap/service/kserve_client.hpp"
#include "gpucap/service/kserve_protocol.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::finding;
using gpucap::fuzz::refusals_only;
namespace kserve = gpucap::service::kserve;

namespace {

// Bounded: at most this many elements per request (make_request_inputs allows 1 GiB).
constexpr std::uint64_t kMaxElements = 1U << 16;

bool small_enough(const kserve::ModelMetadata& model, std::int64_t batch, const std::vector<kserve::InputShape>& shapes) {
  for (const auto& spec : model.inputs) {
    std::vector<std::int64_t> dims = spec.shape;
    for (const auto& shape : shapes) {
      if (shape.name != spec.name) continue;
      dims.assign(shape.dims.begin(), shape.dims.end());
      if (!spec.shape.empty() && spec.shape.front() == -1) dims.insert(dims.begin(), batch);
    }
    std::uint64_t count = 1;
    for (const auto d : dims) {
      const std::uint64_t n = d < 0 ? static_cast<std::uint64_t>(batch) : static_cast<std::uint64_t>(d);
      if (n != 0 && count > kMaxElements / n) return false;
      count *= n;
    }
    if (count > kMaxElements) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  const std::uint8_t choice = input.byte();
  if ((choice & 1U) != 0) {
    const auto body = input.rest();
    const auto message = kserve::error_message_of(body, 400 + (choice >> 1U));
    check(!message.empty(), "an empty error message");
    return 0;
  }
  std::vector<kserve::InputShape> shapes;
  const auto shape_line = input.until("\n");
  if (!shape_line.empty()) {
    refusals_only([&] { shapes.push_back(kserve::parse_input_shape(shape_line)); });
  }
  const auto body = input.rest();
  refusals_only([&] {
    auto model = kserve::parse_model_metadata(body, "http://server");
    const std::int64_t batch = 1 + (choice >> 1U) % 4;
    if (!small_enough(model, batch, shapes)) return;
    const auto inputs = kserve::make_request_inputs(model, batch, shapes, 7);
    check(inputs.size() == model.inputs.size(), "request inputs that are not the model's");
    for (const auto& tensor : inputs) kserve::check_tensor_data(tensor, kserve::kInternalError);
    const bool binary = ((choice >> 3U) & 1U) != 0;
    const auto request = kserve::encode_infer_request(inputs, binary);
    (void)kserve::describe_inputs(inputs);
    // What gpucap serve would make of it, for a model it could serve.
    bool batching = true;
    for (const auto& spec : model.inputs) batching = batching && !spec.shape.empty() && spec.shape.front() == -1;
    for (const auto& spec : model.outputs) batching = batching && !spec.shape.empty() && spec.shape.front() == -1;
    model.max_batch_size = batching ? 8 : 0;
    bool servable = false;
    refusals_only([&] {
      kserve::validate_model_metadata(model);
      servable = true;
    });
    if (!servable || (!batching && batch > 1)) return;
    try {
      (void)kserve::parse_infer_request(request.body, request.header_length, model);
    } catch (const std::exception& e) {
      finding(std::string("gpucap serve refuses what gpucap load sends for the same model: ") + e.what());
    }
  });
  return 0;
}
