#pragma once
// The LibTorch engine: runs a TorchScript model (scripts/export_models.py exports torchvision
// models) at any batch size, on the CPU or a CUDA GPU, in FP32 or (CUDA only) FP16. Inputs are
// synthetic (uniform random images, drawn once from a seed) or the JPEG images of a folder,
// decoded with libjpeg-turbo, resized to the input size and normalised with the ImageNet mean and
// standard deviation, all before the run (batches cycle through them; decoding is not what a run
// measures). Built only when LibTorch is found
// (GPUCAP_HAVE_TORCH); this header names no LibTorch type, so the rest of gpucap builds without it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpucap/engine/engine.hpp"

namespace gpucap::engine {

// The precision the model and its inputs run in: FP16 on CUDA only; BF16 on CUDA (Ampere and
// later) and on the CPU.
enum class TorchPrecision { fp32, fp16, bf16 };
[[nodiscard]] const char* to_string(TorchPrecision precision);
// "fp32", "fp16" or "bf16"; Error(usage) otherwise.
[[nodiscard]] TorchPrecision parse_torch_precision(const std::string& text);

struct TorchEngineOptions {
  std::string model_file;
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  TorchPrecision precision = TorchPrecision::fp32;
  // CUDA only: each batch size's forward pass is captured once as a CUDA graph (after a warm-up
  // pass) and replayed from then on — no per-kernel launch cost, for the fixed batch sizes a
  // server runs. Needs a LibTorch built with CUDA.
  bool cuda_graphs = false;
  int input_size = 224;        // height = width of the input images
  std::uint64_t seed = 1;      // of the synthetic input
  std::string images_dir;      // empty: synthetic input
  std::size_t max_images = 256;  // images of the folder kept (in name order)
};

class TorchEngine final : public Engine {
 public:
  // `now_s` is the platform's clock (a steady clock on real hardware). Throws Error(invalid_data)
  // when the model file does not load or an image cannot be decoded, Error(io) for an image folder
  // that cannot be read, Error(unsupported) for CUDA in a build or on a machine
  // without it, FP16 or CUDA graphs on the CPU, Error(usage) for an input size out of range.
  TorchEngine(const TorchEngineOptions& options, std::function<double()> now_s);
  ~TorchEngine() override;

  [[nodiscard]] std::string name() const override;
  // One forward pass over `batch_size` input images, waited for (CUDA synchronised).
  BatchResult run_batch(int batch_size) override;
  // The model on the given images (batch × 3 × size × size): infer(), as gpucap serve runs it.
  std::vector<TensorData> run_data(const TensorData& input) override;

  // The model's output for `input` (batch_size × 3 × size × size, row-major float32), row-major
  // float32; `output_shape` receives its shape. Error(usage) for an input of the wrong size.
  [[nodiscard]] std::vector<float> infer(const std::vector<float>& input, int batch_size,
                                         std::vector<std::int64_t>* output_shape = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::function<double()> now_s_;
};

}  // namespace gpucap::engine
