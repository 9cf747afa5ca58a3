#include "media/exif_orientation.h"

#include <libexif/exif-data.h>

#include <cstring>
#include <vector>

namespace edgelm::media {

int exif_orientation(std::span<const uint8_t> exif) {
  static constexpr uint8_t kHeader[6] = {'E', 'x', 'i', 'f', 0, 0};
  // libexif expects the APP1 header; WebP and PNG chunks usually carry the bare TIFF data.
  std::vector<uint8_t> buf;
  if (exif.size() < 6 || std::memcmp(exif.data(), kHeader, 6) != 0) {
    buf.assign(kHeader, kHeader + 6);
    buf.insert(buf.end(), exif.begin(), exif.end());
    exif = buf;
  }
  if (exif.size() < 14 || exif.size() > 0xFFFFFF) return 0;
  ExifData* ed = exif_data_new();
  if (!ed) return 0;
  // Read the tags as stored: no "fixing" (which would add default tags), no dropping.
  exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_unset_option(ed, EXIF_DATA_OPTION_IGNORE_UNKNOWN_TAGS);
  exif_data_load_data(ed, exif.data(), static_cast<unsigned>(exif.size()));
  int value = 0;
  ExifEntry* e = ed->ifd[EXIF_IFD_0] ? exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION) : nullptr;
  if (e && e->data && e->components >= 1) {
    const ExifByteOrder order = exif_data_get_byte_order(ed);
    if (e->format == EXIF_FORMAT_SHORT && e->size >= 2) value = exif_get_short(e->data, order);
    if (e->format == EXIF_FORMAT_LONG && e->size >= 4) value = static_cast<int>(exif_get_long(e->data, order));
    if (e->format == EXIF_FORMAT_BYTE && e->size >= 1) value = e->data[0];
  }
  exif_data_unref(ed);
  return value;
}

Image apply_exif_orientation(Image in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int w = in.width, h = in.height;
  const bool swap = orientation >= 5;
  Image out = make_image(swap ? h : w, swap ? w : h);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;  // the source pixel of output (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y, sy = x; break;
        case 6: sx = y, sy = h - 1 - x; break;
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;
        case 8: sx = w - 1 - y, sy = x; break;
      }
      std::memcpy(out.pixel(x, y), in.pixel(sx, sy), 3);
    }
  }
  return out;
}

}  // namespace edgelm::media
