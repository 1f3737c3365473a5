#!/usr/bin/env python3
"""Real inputs and onnxruntime's outputs for the real pretrained ONNX models (tests/oracle/test_onnx_real.cpp).

usage: onnx_real_oracle.py MODELS_DIR OUT_DIR [CASE ...]

MODELS_DIR is what scripts/fetch-onnx-models.sh fills (.models/onnx). For each case whose model file is there,
OUT_DIR/<case>/ gets input_<k>.pb and output_<k>.pb (serialized TensorProtos, named after the graph's inputs and
outputs) and OUT_DIR/<case>/case.json (model file, tolerance, what the outputs mean). Cases whose model is absent
are listed in OUT_DIR/missing.txt; the C++ test decides whether that is a skip or a failure.

The inputs are real data, preprocessed here with numpy the way each model's package does (resize, normalise,
pad); the exact preprocessing only has to be the same for both runtimes, since both get these tensors:
  ppocr_cls   four text-line crops of skimage's page.png (a photographed page), two of them rotated 180 degrees
  ppocr_det   the whole page, 192 x 384
  ppocr_rec   the page's title line, 48 x 320 (its CTC decoding is printed)
  magika      the first and last 1024 bytes of two files of this repository (a C++ header, a shell script)
  nudenet     skimage's astronaut.png at 320 x 320
  silero_vad  1 s of 16 kHz audio in 31 chunks of 576 samples (64 of context + 512 new): no wheel ships a
              recording, so it is synthetic: quiet noise, then a voiced 140 Hz harmonic series with formant-like
              weights under a 4 Hz syllable envelope
The PNG decoder is written here (zlib + the five PNG row filters) so the oracle needs no imaging library.
"""
import json
import pathlib
import struct
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def read_png(path):
    """8-bit, non-interlaced PNG -> uint8 array [H, W, C]."""
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    w, h, depth, color, _, _, interlace = head
    assert depth == 8 and interlace == 0, f"{path}: expected 8-bit non-interlaced, got {depth}, {interlace}"
    ch = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * ch)
    out = np.zeros((h, w * ch), np.int32)
    prev = np.zeros(w * ch, np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            row = line
        elif f == 2:
            row = (line + prev) & 255
        else:  # Sub, Average, Paeth depend on the pixel to the left: byte by byte
            row = np.zeros_like(line)
            for x in range(w * ch):
                a = row[x - ch] if x >= ch else 0
                b = prev[x]
                c = prev[x - ch] if x >= ch else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) >> 1
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[x] = (line[x] + pred) & 255
        out[y] = row
        prev = row
    img = out.reshape(h, w, ch).astype(np.uint8)
    if ch == 1:
        img = np.repeat(img, 3, axis=2)
    return img[:, :, :3]


def resize(img, h, w):
    """Bilinear resize (half-pixel centres) of [H, W, C] float."""
    H, W = img.shape[:2]

    def axis(n_out, n_in):
        x = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        i0 = np.floor(x).astype(int)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, (x - i0)[:, None]

    y0, y1, fy = axis(h, H)
    x0, x1, fx = axis(w, W)
    img = img.astype(np.float64)
    rows = img[y0] * (1 - fy[:, :, None]) + img[y1] * fy[:, :, None]
    return rows[:, x0] * (1 - fx) + rows[:, x1] * fx


def nchw(img):
    return np.ascontiguousarray(img.transpose(2, 0, 1)[None]).astype(np.float32)


def text_line(img, box, width, rotate=False):
    """PP-OCR's cls/rec preprocessing: height 48, width in proportion (at most `width`), (x/255-0.5)/0.5,
    zero-padded on the right to `width`."""
    x0, y0, x1, y1 = box
    crop = img[y0:y1, x0:x1]
    if rotate:
        crop = crop[::-1, ::-1]
    w = min(width, int(np.ceil(48 * crop.shape[1] / crop.shape[0])))
    line = (resize(crop, 48, w) / 255.0 - 0.5) / 0.5
    out = np.zeros((48, width, 3))
    out[:, :w] = line
    return nchw(out)[0]


# Boxes (x0, y0, x1, y1) of text lines in page.png (384 x 191), read off the image.
TITLE = (0, 0, 290, 40)
LINES = [(0, 42, 384, 64), (0, 62, 384, 84), (0, 84, 384, 106), (0, 104, 384, 126)]


def magika_features(path, cfg):
    """The first beg_size bytes after leading whitespace and the last end_size bytes before trailing
    whitespace, padded with padding_token (magika's standard_v3 features)."""
    data = pathlib.Path(path).read_bytes()
    block = cfg["block_size"]
    beg = data[:block].lstrip()[: cfg["beg_size"]]
    end = data[-block:].rstrip()[-cfg["end_size"] :]
    pad = cfg["padding_token"]
    f = [*beg, *[pad] * (cfg["beg_size"] - len(beg)), *[pad] * (cfg["end_size"] - len(end)), *end]
    return np.array(f, np.int32)


def cases(models, repo):
    page = read_png(models / "images/page.png")
    boxes = [TITLE] + LINES
    yield dict(
        name="ppocr_cls",
        model="ppocr_cls_mobile_v2.onnx",
        what="text direction (0 upright, 1 rotated 180 degrees) of page.png's title and 4 lines, each upright "
        "and rotated, 48x192; outputs softmax",
        inputs=[np.stack([text_line(page, b, 192, rotate=r) for b in boxes for r in (False, True)])],
        labels=[0, 1] * len(boxes),  # the fine-tuning test's targets
        atol=1e-4,
        rtol=1e-3,
        argmax_axis=1,
    )
    yield dict(
        name="ppocr_det",
        model="ppocr_det_v4.onnx",
        what="text probability map of page.png at 192x384",
        inputs=[nchw((resize(page, 192, 384) / 255.0 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225])],
        atol=1e-4,
        rtol=1e-3,
    )
    yield dict(
        name="ppocr_rec",
        model="ppocr_rec_v4.onnx",
        what="character probabilities (CTC) of page.png's title line, 48x320",
        inputs=[text_line(page, TITLE, 320)[None]],
        atol=1e-4,
        rtol=1e-3,
        argmax_axis=2,
    )
    cfg_path = models / "magika_standard_v3_3.json"
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text())
        files = ["src/meganeura/onnx/onnx.hpp", "scripts/fetch-onnx-models.sh"]
        yield dict(
            name="magika",
            model="magika_standard_v3_3.onnx",
            what="content type of " + " and ".join(files) + " from their first and last 1024 bytes",
            inputs=[np.stack([magika_features(repo / f, cfg) for f in files])],
            atol=1e-4,
            rtol=1e-3,
            argmax_axis=1,
            label_names=cfg["target_labels_space"],
        )
    if (models / "images/astronaut.png").exists():
        astro = read_png(models / "images/astronaut.png")
        yield dict(
            name="nudenet",
            model="nudenet_320n.onnx",
            what="YOLOv8n boxes (cx, cy, w, h in pixels) and 18 class scores of 2100 anchors, astronaut.png "
            "at 320x320",
            inputs=[nchw(resize(astro, 320, 320) / 255.0)],
            atol=1e-3,
            rtol=1e-3,
        )
    yield dict(
        name="silero_vad",
        model="silero_vad_16k_sequence.onnx",
        what="speech probability of 31 chunks of synthetic voiced audio (LSTM over the chunks)",
        inputs=[vad_chunks(), np.zeros((1, 1, 128), np.float32), np.zeros((1, 1, 128), np.float32)],
        atol=1e-4,
        rtol=1e-3,
    )


def vad_chunks():
    rng = np.random.default_rng(0)
    t = np.arange(16000) / 16000.0
    voiced = sum(np.sin(2 * np.pi * 140 * k * t) / k * (1.5 if k in (5, 6, 16, 17) else 1.0) for k in range(1, 25))
    envelope = np.where(t < 0.4, 0.0, 0.5 * (1 - np.cos(2 * np.pi * 4 * t)))
    audio = 0.002 * rng.standard_normal(16000) + 0.1 * envelope * voiced
    padded = np.concatenate([np.zeros(64), audio])
    return np.stack([padded[k * 512 : k * 512 + 576] for k in range(31)]).astype(np.float32)


def main():
    models, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    only = set(sys.argv[3:])
    repo = pathlib.Path(__file__).resolve().parents[2]
    out.mkdir(parents=True, exist_ok=True)
    missing = []
    for c in cases(models, repo):
        if only and c["name"] not in only:
            continue
        path = models / c["model"]
        if not path.exists():
            missing.append(c["name"] + "\t" + str(path))
            continue
        model = onnx.load(str(path))
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        feeds = dict(zip(names, c["inputs"]))
        outputs = sess.run(None, feeds)
        d = out / c["name"]
        d.mkdir(exist_ok=True)
        for k, (n, v) in enumerate(feeds.items()):
            (d / f"input_{k}.pb").write_bytes(numpy_helper.from_array(v, n).SerializeToString())
        summary = []
        for k, (o, v) in enumerate(zip(sess.get_outputs(), outputs)):
            (d / f"output_{k}.pb").write_bytes(
                numpy_helper.from_array(v.astype(np.float32), o.name).SerializeToString()
            )
            summary.append(f"{o.name} {list(v.shape)}")
        if "argmax_axis" in c:
            top = np.argmax(outputs[0], axis=c["argmax_axis"])
            if "label_names" in c:
                summary.append("argmax " + ", ".join(c["label_names"][i] for i in top.ravel()))
            elif c["name"] == "ppocr_rec":
                chars = [""] + list(
                    next(p.value for p in model.metadata_props if p.key == "character").split("\n")
                ) + [" "]
                seq, last = [], 0
                for i in top.ravel():
                    if i != last and i != 0:
                        seq.append(chars[i])
                    last = i
                summary.append("decoded '" + "".join(seq) + "'")
            else:
                summary.append("argmax " + " ".join(str(i) for i in top.ravel()))
        meta = {k: v for k, v in c.items() if k not in ("inputs", "label_names")}
        # The input of a Softmax that computes a graph output: the logits a fine-tuning loss starts from.
        outs = {o.name for o in model.graph.output}
        ident = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Identity"}
        outs |= {ident[o] for o in list(outs) if o in ident}
        soft = [n.input[0] for n in model.graph.node if n.op_type == "Softmax" and n.output[0] in outs]
        meta.update(model_path=str(path), onnxruntime=ort.__version__, summary=summary, logits=soft[:1])
        (d / "case.json").write_text(json.dumps(meta, indent=1))
        print(c["name"] + ": " + "; ".join(summary))
    (out / "missing.txt").write_text("".join(m + "\n" for m in missing))


if __name__ == "__main__":
    main()
