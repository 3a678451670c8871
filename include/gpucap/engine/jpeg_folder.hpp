#pragma once
// Decoding a folder of JPEG images with libjpeg-turbo (Debian's libturbojpeg0-dev), for the
// LibTorch engine's real inputs. Decoding uses libjpeg-turbo's DCT scaling to the smallest size
// whose shorter side still reaches the wanted one; the engine then resizes on its own device.

#include <cstdint>
#include <string>
#include <vector>

namespace gpucap::engine {

struct DecodedImage {
  std::string path;
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // height × width × 3, row-major
};

// The regular files of `folder`, sorted by name, at most `max_images`; each decoded. Throws
// Error(io) for a folder that cannot be read, Error(invalid_data) for an empty one or a file that
// is not a JPEG libjpeg-turbo can decode (naming the file and libjpeg-turbo's message).
[[nodiscard]] std::vector<DecodedImage> decode_jpeg_folder(const std::string& folder, int min_side,
                                                           std::size_t max_images);

}  // namespace gpucap::engine
