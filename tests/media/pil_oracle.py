#!/usr/bin/env python3
"""The python3-pil oracle of tests/media: writes test images and what PIL (and the Hugging Face
processors, re-expressed here with PIL + numpy) make of them.

Usage: pil_oracle.py decode|resize|preprocess|expect OUTDIR
(expect: OUTDIR already holds images written by the test; PIL's decode of each is added.)
Each mode writes files into OUTDIR and a manifest OUTDIR/manifest.txt, one case a line,
fields separated by single spaces (see each mode). Raw images are RGB8 rows, top to bottom;
tensors are float32 little-endian, CHW.
"""
import io
import math
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image, ImageOps

RNG = np.random.default_rng(20260)
FILTERS = {"nearest": Image.NEAREST, "box": Image.BOX, "bilinear": Image.BILINEAR,
           "hamming": Image.HAMMING, "bicubic": Image.BICUBIC, "lanczos": Image.LANCZOS}


def picture(w, h, noise=24):
    """A deterministic photo-like RGB8 picture: gradients, a disc, edges, some noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * x / max(w - 1, 1)
    g = 255 * y / max(h - 1, 1)
    b = 255 * (((x - w / 2) ** 2 + (y - h / 2) ** 2) < (min(w, h) / 3) ** 2)
    img = np.stack([r, g, 0.5 * b + 0.5 * ((x.astype(int) // 4 + y.astype(int) // 4) % 2) * 255], -1)
    img += RNG.normal(0, noise, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def noise(w, h):
    return RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)


def expected_rgb(data):
    im = Image.open(io.BytesIO(data))
    im = ImageOps.exif_transpose(im)
    return np.asarray(im.convert("RGB"))


# ---- a minimal PNG writer for what PIL cannot write (16-bit colour, 2/4-bit, interlace, tRNS) ----
def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _pack_rows(samples, depth):
    """samples [h, w, c] ints -> list of packed scanlines (no filter byte)."""
    h, w, c = samples.shape
    rows = []
    for yy in range(h):
        flat = samples[yy].reshape(-1).astype(np.uint32)
        if depth == 16:
            rows.append(flat.astype(">u2").tobytes())
        elif depth == 8:
            rows.append(flat.astype(np.uint8).tobytes())
        else:
            per = 8 // depth
            out = bytearray((len(flat) * depth + 7) // 8)
            for i, v in enumerate(flat):
                out[i // per] |= int(v) << (8 - depth * (i % per + 1))
            rows.append(bytes(out))
    return rows


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(samples, color_type, depth, interlace=False, plte=None, trns=None, exif=None, exif_late=False, extra=()):
    h, w = samples.shape[:2]
    raw = bytearray()
    passes = [(0, 0, 1, 1)] if not interlace else ADAM7
    for x0, y0, dx, dy in passes:
        sub = samples[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        for i, row in enumerate(_pack_rows(sub, depth)):
            ftype = (i % 2) if depth >= 8 else 0  # some rows with the Sub filter
            if ftype == 1:
                bpp = max(1, samples.shape[2] * depth // 8)
                b = bytearray(row)
                for j in range(len(b) - 1, bpp - 1, -1):
                    b[j] = (b[j] - b[j - bpp]) & 0xFF
                row = bytes(b)
            raw += bytes([ftype]) + row
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    if exif is not None and not exif_late:
        out += _chunk(b"eXIf", exif)
    if plte is not None:
        out += _chunk(b"PLTE", bytes(plte))
    if trns is not None:
        out += _chunk(b"tRNS", trns)
    for kind, data in extra:
        out += _chunk(kind, data)
    out += _chunk(b"IDAT", zlib.compress(bytes(raw), 9))
    if exif is not None and exif_late:
        out += _chunk(b"eXIf", exif)
    return out + _chunk(b"IEND", b"")


def pil_save(arr_or_img, fmt, **kw):
    im = arr_or_img if isinstance(arr_or_img, Image.Image) else Image.fromarray(arr_or_img)
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def exif_le(orientation):
    ex = Image.Exif()
    ex[0x0112] = orientation
    ex[0x010F] = "edgelm"
    return ex.tobytes()  # with the "Exif\0\0" prefix


def tiff_be(orientation, ifd1_only=False):
    """A big-endian TIFF/EXIF blob, orientation in IFD0 (or only in IFD1, which PIL ignores)."""
    entry = struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0)
    make = struct.pack(">HHI4s", 0x010F, 2, 4, b"abc\0")
    if not ifd1_only:
        ifd0 = struct.pack(">H", 2) + entry + make + struct.pack(">I", 0)
        return b"MM\x00\x2a" + struct.pack(">I", 8) + ifd0
    ifd1_offset = 8 + 2 + 12 + 4
    ifd0 = struct.pack(">H", 1) + make + struct.pack(">I", ifd1_offset)
    ifd1 = struct.pack(">H", 1) + entry + struct.pack(">I", 0)
    return b"MM\x00\x2a" + struct.pack(">I", 8) + ifd0 + ifd1


def mode_decode(out):
    cases = {}
    base = picture(37, 29)
    cases["jpeg_420.jpg"] = pil_save(base, "JPEG", quality=90, subsampling=2)
    cases["jpeg_444.jpg"] = pil_save(base, "JPEG", quality=95, subsampling=0)
    cases["jpeg_422.jpg"] = pil_save(base, "JPEG", quality=75, subsampling=1)
    cases["jpeg_progressive.jpg"] = pil_save(base, "JPEG", quality=85, progressive=True)
    cases["jpeg_progressive_444.jpg"] = pil_save(picture(64, 48), "JPEG", quality=90, progressive=True, subsampling=0)
    cases["jpeg_optimized.jpg"] = pil_save(picture(120, 17), "JPEG", quality=60, optimize=True)
    cases["jpeg_gray.jpg"] = pil_save(Image.fromarray(base).convert("L"), "JPEG", quality=90)
    cases["jpeg_gray_progressive.jpg"] = pil_save(Image.fromarray(base).convert("L"), "JPEG", progressive=True)
    cases["jpeg_cmyk.jpg"] = pil_save(Image.fromarray(base).convert("CMYK"), "JPEG", quality=90)
    cases["jpeg_cmyk_noise.jpg"] = pil_save(Image.fromarray(RNG.integers(0, 256, (13, 21, 4), dtype=np.uint8), "CMYK"),
                                            "JPEG", quality=95)
    cases["jpeg_1x1.jpg"] = pil_save(picture(1, 1), "JPEG")
    cases["jpeg_big.jpg"] = pil_save(picture(333, 251), "JPEG", quality=80)
    for o in range(1, 9):
        cases[f"jpeg_exif{o}.jpg"] = pil_save(base, "JPEG", quality=90, exif=exif_le(o))
        cases[f"webp_exif{o}.webp"] = pil_save(base, "WEBP", quality=90, exif=exif_le(o))
        cases[f"png_exif{o}.png"] = write_png(base, 2, 8, exif=exif_le(o)[6:])
    for o in (3, 6, 8):
        cases[f"jpeg_exif_be{o}.jpg"] = pil_save(base, "JPEG", exif=b"Exif\x00\x00" + tiff_be(o))
    cases["jpeg_exif_ifd1_only.jpg"] = pil_save(base, "JPEG", exif=b"Exif\x00\x00" + tiff_be(6, ifd1_only=True))
    cases["jpeg_exif_bad_value.jpg"] = pil_save(base, "JPEG", exif=b"Exif\x00\x00" + tiff_be(9))
    cases["png_exif_late6.png"] = write_png(base, 2, 8, exif=exif_le(6)[6:], exif_late=True)

    rgba = np.concatenate([base, RNG.integers(0, 256, base.shape[:2] + (1,), dtype=np.uint8)], -1)
    gray = np.asarray(Image.fromarray(base).convert("L"))
    cases["png_rgb.png"] = pil_save(base, "PNG")
    cases["png_rgba.png"] = pil_save(Image.fromarray(rgba, "RGBA"), "PNG")
    cases["png_gray.png"] = pil_save(Image.fromarray(gray), "PNG")
    cases["png_gray_alpha.png"] = pil_save(Image.fromarray(np.stack([gray, rgba[..., 3]], -1), "LA"), "PNG")
    cases["png_bilevel.png"] = pil_save(Image.fromarray(gray).convert("1"), "PNG")
    cases["png_palette.png"] = pil_save(Image.fromarray(base).quantize(200), "PNG")
    cases["png_palette16.png"] = pil_save(Image.fromarray(base).quantize(16), "PNG", bits=4)
    p = Image.fromarray(base).quantize(64)
    p.info["transparency"] = bytes(range(0, 256, 4))
    cases["png_palette_trns.png"] = pil_save(p, "PNG", transparency=bytes(range(0, 256, 4)))
    g16 = RNG.integers(0, 65536, base.shape[:2], dtype=np.uint32)
    g16[:, :5] = RNG.integers(0, 256, (base.shape[0], 5))  # some values PIL keeps, the rest it clips
    cases["png_gray16.png"] = write_png(g16[..., None], 0, 16)
    cases["png_gray16_pil.png"] = pil_save(Image.fromarray(g16.astype(np.int32), "I"), "PNG")
    rgb16 = RNG.integers(0, 65536, base.shape, dtype=np.uint32)
    cases["png_rgb16.png"] = write_png(rgb16, 2, 16)
    cases["png_rgba16.png"] = write_png(RNG.integers(0, 65536, base.shape[:2] + (4,), dtype=np.uint32), 6, 16)
    cases["png_gray_alpha16.png"] = write_png(RNG.integers(0, 65536, base.shape[:2] + (2,), dtype=np.uint32), 4, 16)
    for depth in (1, 2, 4):
        cases[f"png_gray{depth}.png"] = write_png(RNG.integers(0, 1 << depth, base.shape[:2] + (1,)), 0, depth)
        n = 1 << depth
        cases[f"png_palette{depth}bit.png"] = write_png(RNG.integers(0, n, base.shape[:2] + (1,)), 3, depth,
                                                        plte=RNG.integers(0, 256, 3 * n).tolist())
    # Palettes shorter than the indices used: PIL maps the rest to grey (i, i, i).
    cases["png_palette_short.png"] = write_png(RNG.integers(0, 256, base.shape[:2] + (1,)), 3, 8,
                                               plte=RNG.integers(0, 256, 3 * 20).tolist())
    cases["png_palette_short4bit.png"] = write_png(RNG.integers(0, 16, base.shape[:2] + (1,)), 3, 4,
                                                   plte=[1, 2, 3, 4, 5, 6])
    # PIL's other PNG orientation sources: ImageMagick's raw profile, and XMP when EXIF has none.
    hexed = exif_le(6).hex()
    raw = "\nexif\n" + f"{len(hexed) // 2:8d}\n" + "\n".join(hexed[i:i + 72] for i in range(0, len(hexed), 72)) + "\n"
    cases["png_raw_profile6.png"] = write_png(base, 2, 8, extra=[(b"zTXt", b"Raw profile type exif\0\0" +
                                                                  zlib.compress(raw.encode()))])
    xmp_attr = '<x:xmpmeta><rdf:Description tiff:Orientation="8" tiff:Make="x"/></x:xmpmeta>'
    xmp_elem = "<x:xmpmeta><tiff:Orientation>3</tiff:Orientation></x:xmpmeta>"
    itxt = lambda text: b"XML:com.adobe.xmp\0\0\0\0\0" + text.encode()
    cases["png_xmp_attr8.png"] = write_png(base, 2, 8, extra=[(b"iTXt", itxt(xmp_attr))])
    cases["png_xmp_elem3.png"] = write_png(base, 2, 8, extra=[(b"iTXt", itxt(xmp_elem))])
    cases["png_xmp_under_exif1.png"] = write_png(base, 2, 8, exif=exif_le(1)[6:], extra=[(b"iTXt", itxt(xmp_attr))])
    cases["png_rgb_trns.png"] = write_png(base, 2, 8, trns=struct.pack(">HHH", *base[0, 0]))
    cases["png_gray_trns.png"] = write_png(gray[..., None], 0, 8, trns=struct.pack(">H", int(gray[0, 0])))
    for name, (arr, ct, depth) in {"rgb": (base, 2, 8), "rgba": (rgba, 6, 8), "gray": (gray[..., None], 0, 8),
                                   "rgb16": (rgb16, 2, 16), "gray2": (RNG.integers(0, 4, base.shape[:2] + (1,)), 0, 2),
                                   "gray16": (g16[..., None], 0, 16)}.items():
        cases[f"png_interlaced_{name}.png"] = write_png(arr, ct, depth, interlace=True)
    for w, h in ((1, 1), (3, 2), (9, 9), (1, 17)):
        cases[f"png_interlaced_{w}x{h}.png"] = write_png(picture(w, h), 2, 8, interlace=True)
    cases["png_1x1.png"] = pil_save(picture(1, 1), "PNG")

    cases["webp_lossy.webp"] = pil_save(base, "WEBP", quality=80)
    cases["webp_lossy_big.webp"] = pil_save(picture(301, 199), "WEBP", quality=50)
    cases["webp_lossless.webp"] = pil_save(base, "WEBP", lossless=True)
    cases["webp_lossy_alpha.webp"] = pil_save(Image.fromarray(rgba, "RGBA"), "WEBP", quality=90)
    cases["webp_lossless_alpha.webp"] = pil_save(Image.fromarray(rgba, "RGBA"), "WEBP", lossless=True, exact=True)
    cases["webp_1x1.webp"] = pil_save(picture(1, 1), "WEBP")
    frames = [Image.fromarray(picture(37, 29)), Image.fromarray(noise(37, 29))]
    cases["webp_animated.webp"] = pil_save(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100,
                                           quality=90)

    with open(os.path.join(out, "manifest.txt"), "w") as m:
        for name, data in sorted(cases.items()):
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
            exp = expected_rgb(data)
            with open(os.path.join(out, name + ".rgb"), "wb") as f:
                f.write(np.ascontiguousarray(exp).tobytes())
            m.write(f"{name} {name}.rgb {exp.shape[1]} {exp.shape[0]}\n")


def mode_resize(out):
    sources = [(1, 1), (1, 7), (7, 1), (2, 2), (3, 5), (16, 16), (37, 29), (64, 48), (100, 3), (255, 170)]
    lines = []
    for i, (sw, sh) in enumerate(sources):
        src = noise(sw, sh) if i % 2 else picture(sw, sh)
        sname = f"src{i}.rgb"
        with open(os.path.join(out, sname), "wb") as f:
            f.write(src.tobytes())
        targets = {(1, 1), (sw, max(1, sh // 2)), (max(1, sw // 3), sh), (sw * 2 + 1, sh * 3), (7, 5),
                   (max(1, sw * 2 // 3), max(1, sh * 3 // 5)), (sw + 1, sh + 1), (97, 61), (sw, sh)}
        for tw, th in sorted(targets):
            for fname, f in FILTERS.items():
                res = np.asarray(Image.fromarray(src).resize((tw, th), resample=f))
                dname = f"out{len(lines)}.rgb"
                with open(os.path.join(out, dname), "wb") as fo:
                    fo.write(res.tobytes())
                lines.append(f"{sname} {sw} {sh} {dname} {tw} {th} {fname}")
    # Model-sized resizes.
    for j, ((sw, sh), (tw, th), fname) in enumerate([((640, 480), (896, 896), "bilinear"),
                                                      ((1234, 777), (896, 896), "bilinear"),
                                                      ((1234, 777), (512, 323), "lanczos"),
                                                      ((500, 700), (2048, 1434), "lanczos"),
                                                      ((901, 601), (384, 384), "bicubic"),
                                                      ((333, 222), (224, 224), "bicubic")]):
        src = picture(sw, sh)
        sname = f"big{j}.rgb"
        with open(os.path.join(out, sname), "wb") as f:
            f.write(src.tobytes())
        res = np.asarray(Image.fromarray(src).resize((tw, th), resample=FILTERS[fname]))
        dname = f"bigout{j}.rgb"
        with open(os.path.join(out, dname), "wb") as fo:
            fo.write(res.tobytes())
        lines.append(f"{sname} {sw} {sh} {dname} {tw} {th} {fname}")
    with open(os.path.join(out, "manifest.txt"), "w") as m:
        m.write("\n".join(lines) + "\n")


# ---- the Hugging Face processors, re-expressed (slow PIL + numpy path) ----
def hf_normalize(arr, mean, std, factor=1 / 255):
    x = (arr.astype(np.float64) * factor).astype(np.float32)
    x = (x - np.array(mean, dtype=np.float32)) / np.array(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def pil_resize(arr, w, h, f):
    return np.asarray(Image.fromarray(arr).resize((w, h), resample=f))


def gemma3(arr, size, mean, std):
    return [hf_normalize(pil_resize(arr, size, size, Image.BILINEAR), mean, std)], 0, 0


def idefics3(arr, longest, tile, split, mean, std, max_size=4096):
    h, w = arr.shape[:2]
    ar = w / h
    if w >= h:
        w = longest
        h = int(w / ar)
        h += h % 2
    else:
        h = longest
        w = int(h * ar)
        w += w % 2
    h, w = max(h, 1), max(w, 1)
    ar = w / h
    if w >= h and w > max_size:
        w = max_size
        h = int(w / ar)
    elif h > w and h > max_size:
        h = max_size
        w = int(h * ar)
    h, w = max(h, 1), max(w, 1)
    img = pil_resize(arr, w, h, Image.LANCZOS)
    if not split:
        return [hf_normalize(pil_resize(img, tile, tile, Image.LANCZOS), mean, std)], 0, 0
    ar = w / h
    if w >= h:
        w = math.ceil(w / tile) * tile
        h = math.ceil(int(w / ar) / tile) * tile
    else:
        h = math.ceil(h / tile) * tile
        w = math.ceil(int(h * ar) / tile) * tile
    img = pil_resize(img, w, h, Image.LANCZOS)
    frames, rows, cols = [], 0, 0
    if h > tile or w > tile:
        rows, cols = math.ceil(h / tile), math.ceil(w / tile)
        oh, ow = math.ceil(h / rows), math.ceil(w / cols)
        for r in range(rows):
            for c in range(cols):
                frames.append(img[r * oh:min(r * oh + oh, h), c * ow:min(c * ow + ow, w)])
        if h != tile or w != tile:
            img = pil_resize(img, tile, tile, Image.LANCZOS)
    frames.append(img)
    return [hf_normalize(f, mean, std) for f in frames], rows, cols


def mode_preprocess(out):
    base = picture(37, 29)
    rgba = np.concatenate([picture(29, 37), RNG.integers(0, 256, (37, 29, 1), dtype=np.uint8)], -1)
    images = {
        "land.png": pil_save(base, "PNG"),
        "portrait_rgba.png": pil_save(Image.fromarray(rgba, "RGBA"), "PNG"),
        "gray.png": pil_save(Image.fromarray(picture(61, 40)).convert("L"), "PNG"),
        "gray_alpha.png": pil_save(Image.fromarray(picture(40, 61)).convert("LA"), "PNG"),
        "wide.png": pil_save(picture(300, 41), "PNG"),
        "tall.png": pil_save(picture(5, 300), "PNG"),
        "square.png": pil_save(picture(64, 64), "PNG"),
        "photo.png": pil_save(picture(640, 427), "PNG"),
        "one.png": pil_save(picture(1, 1), "PNG"),
        "rotated6.jpg": pil_save(picture(48, 32), "JPEG", exif=exif_le(6)),
    }
    mean_std = [([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]), ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])]
    configs = []
    for name in images:
        for k, (mean, std) in enumerate(mean_std):
            configs.append((name, "gemma3", 64 + 7 * k, 0, 1, mean, std))
            configs.append((name, "idefics3", 4 * 48, 48, 1, mean, std))
        configs.append((name, "idefics3", 3 * 40, 40, 0, mean_std[0][0], mean_std[0][1]))
    configs.append(("photo.png", "gemma3", 896, 0, 1, mean_std[0][0], mean_std[0][1]))
    configs.append(("photo.png", "idefics3", 2048, 512, 1, mean_std[0][0], mean_std[0][1]))
    configs.append(("portrait_rgba.png", "idefics3", 2048, 512, 1, mean_std[0][0], mean_std[0][1]))
    with open(os.path.join(out, "manifest.txt"), "w") as m:
        for name, data in images.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
        for i, (name, kind, size, tile, split, mean, std) in enumerate(configs):
            arr = expected_rgb(images[name])
            if kind == "gemma3":
                frames, rows, cols = gemma3(arr, size, mean, std)
            else:
                frames, rows, cols = idefics3(arr, size, tile, bool(split), mean, std)
            files = []
            for j, fr in enumerate(frames):
                fn = f"case{i}_{j}.f32"
                with open(os.path.join(out, fn), "wb") as f:
                    f.write(fr.astype("<f4").tobytes())
                files.append(f"{fn}:{fr.shape[2]}x{fr.shape[1]}")
            ms = ",".join(repr(float(v)) for v in mean + std)
            m.write(f"{name} {kind} {size} {tile} {split} {ms} {rows} {cols} {' '.join(files)}\n")


def mode_expect(out):
    """What PIL makes of every file the test put in OUTDIR; "error" when it cannot open it."""
    with open(os.path.join(out, "manifest.txt"), "w") as m:
        for name in sorted(os.listdir(out)):
            if name == "manifest.txt" or name.endswith(".rgb"):
                continue
            with open(os.path.join(out, name), "rb") as f:
                data = f.read()
            try:
                exp = expected_rgb(data)
            except Exception:  # noqa: BLE001 - any PIL failure is the answer "error"
                m.write(f"{name} error 0 0\n")
                continue
            with open(os.path.join(out, name + ".rgb"), "wb") as f:
                f.write(np.ascontiguousarray(exp).tobytes())
            m.write(f"{name} {name}.rgb {exp.shape[1]} {exp.shape[0]}\n")


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    {"decode": mode_decode, "resize": mode_resize, "preprocess": mode_preprocess, "expect": mode_expect}[mode](out)
