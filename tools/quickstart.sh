#!/usr/bin/env bash
# Installs what is missing (Debian, as root), builds Release into build/, and runs decode once.
# usage: tools/quickstart.sh [MODEL.gguf] [PROMPT]
# Without MODEL it makes one with gguf-synth: a stories15M-shaped f16 model with random weights
# (so its text is gibberish; the speed is real). Any llama GGUF with F32/F16/BF16 weights works.
set -euo pipefail
if [ -n "${1:-}" ] && [ ! -f "$1" ]; then echo "quickstart: no such file: $1" >&2; exit 1; fi
model=${1:+$(realpath -- "$1")}       # before the cd: a MODEL path relative to where it was run
cd "$(dirname "$0")/.."
need=()
for p in cmake gcc make libc6-dev libnuma-dev libcjson-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "quickstart: missing ${need[*]}; run this as root (or: sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
if [ -z "$model" ]; then
  model=build/models/synth-15M-f16.gguf
  if [ ! -f "$model" ]; then
    mkdir -p build/models
    build/bin/gguf-synth "$model" --n-embd 288 --n-layer 6 --n-head 6 --n-kv-head 6 --n-ff 768 \
      --n-vocab 32000 --ctx 256 --dtype f16 --seed 1
  fi
fi
build/bin/decode -m "$model" -p "${2:-Once upon a time}" -n 64 --temp 0
