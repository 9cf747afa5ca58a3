// Image and ImageTensor: the two pixel containers of the media layer.
//
// Image is what the decoders produce and the resizers take: 8-bit RGB, interleaved, rows top to
// bottom with no padding, i.e. exactly PIL's `np.asarray(img.convert("RGB"))` laid out flat.
// ImageTensor is a model input: float planes, channel-major (CHW), as the Hugging Face
// processors hand `pixel_values` to the vision tower.
//
// Invariants: rgb.size() == width * height * 3 and chw.size() == channels * height * width;
// width, height >= 1 for any image a decoder returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgelm::media {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]

  const uint8_t* pixel(int x, int y) const { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
  uint8_t* pixel(int x, int y) { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
};

// A blank (zero) image of the given size.
inline Image make_image(int width, int height) {
  return Image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
}

struct ImageTensor {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<float> chw;  // [channels, height, width]
};

}  // namespace edgelm::media
