#include "gpucap/engine/jpeg_folder.hpp"

#include <fmt/format.h>
#include <turbojpeg.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"

namespace gpucap::engine {

namespace {

using Decompressor = std::unique_ptr<void, int (*)(tjhandle)>;

// The smallest libjpeg-turbo scaling (1/8 .. 2) whose shorter side is still >= min_side; the
// largest available when none is.
tjscalingfactor scaling_for(int width, int height, int min_side) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  tjscalingfactor best{1, 1};
  int best_side = std::min(width, height);
  int largest_side = 0;
  tjscalingfactor largest{1, 1};
  for (int i = 0; i < count; ++i) {
    const int side = std::min(TJSCALED(width, factors[i]), TJSCALED(height, factors[i]));
    if (side > largest_side) {
      largest_side = side;
      largest = factors[i];
    }
    if (side >= min_side && side < best_side) {
      best_side = side;
      best = factors[i];
    }
  }
  return std::min(width, height) >= min_side ? best : largest;
}

DecodedImage decode(tjhandle decompressor, const std::string& path, int min_side) {
  const auto bytes = read_text_file(path);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(decompressor, data, size, &width, &height, &subsampling, &colorspace) != 0) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: not a JPEG image libjpeg-turbo can decode ({})", path,
                                                     tjGetErrorStr2(decompressor)));
  }
  const auto factor = scaling_for(width, height, min_side);
  DecodedImage image;
  image.path = path;
  image.width = TJSCALED(width, factor);
  image.height = TJSCALED(height, factor);
  image.rgb.resize(static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3u);
  if (tjDecompress2(decompressor, data, size, image.rgb.data(), image.width, 0, image.height, TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0 &&
      tjGetErrorCode(decompressor) == TJERR_FATAL) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: not a JPEG image libjpeg-turbo can decode ({})", path,
                                                     tjGetErrorStr2(decompressor)));
  }
  return image;
}

}  // namespace

std::vector<DecodedImage> decode_jpeg_folder(const std::string& folder, int min_side, std::size_t max_images) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    throw Error(ErrorCode::io, fmt::format("{}: not a folder that can be read", folder));
  }
  std::vector<std::string> files;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path().string());
  }
  if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot list ({})", folder, ec.message()));
  if (files.empty()) throw Error(ErrorCode::invalid_data, fmt::format("{}: no images in the folder", folder));
  std::sort(files.begin(), files.end());
  if (files.size() > max_images) files.resize(max_images);
  const Decompressor decompressor(tjInitDecompress(), tjDestroy);
  if (!decompressor) throw Error(ErrorCode::internal, "libjpeg-turbo: cannot create a decompressor");
  std::vector<DecodedImage> images;
  images.reserve(files.size());
  for (const auto& file : files) images.push_back(decode(decompressor.get(), file, min_side));
  return images;
}

}  // namespace gpucap::engine
