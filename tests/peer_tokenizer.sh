#!/usr/bin/env bash
# Token ids of decode's tokenizer against llama.cpp's (the peer that ../shared/peer/setup.sh
# installs: prebuilt llama.cpp v0.4.0), with add_special and parse_special off, on llama.cpp's 46
# test strings plus tests/tokenizer_stress/stress.inp (emoji and ZWJ sequences, CJK and other
# scripts, combining marks, numbers of 1-12 digits, runs of spaces/tabs/newlines, \r\n, invalid
# UTF-8, contractions in both cases, code, unassigned code points):
#   - every byte-level BPE vocab in ../shared/testdata/vocab;
#   - a gguf-synth BPE vocab for each tokenizer.ggml.pre name decode accepts;
#   - per vocab, BOS and ids of one text through ../shared/peer/peer_tokenize.mjs as well;
#   - with parse_special on (tokenize --parse-special), the same texts and
#     tests/tokenizer_stress/special.inp (control, unknown and chat-template pieces, whole and
#     cut), on those vocabs and the SentencePiece ones (llama-spm, stories260K).
# llama.cpp runs through tests/llama_tokenize.c, built here against the peer's libllama (one
# process for all cases; node's argv cannot carry invalid UTF-8). --freeze rewrites
# tests/tokenizer_stress/VOCAB.out and VOCAB.special.out (parse_special on special.inp), the
# llama.cpp ids test_tokenizer checks without the peer.
# --speed times instead a 1 MiB encode (load excluded; median of REPS, default 5, interleaved)
# of three texts (multilingual test strings, C source, English prose) with each BPE vocab and
# synth Llama 3 / Qwen2 vocabs of 32000 tokens, by decode and by llama.cpp, as a table.
# usage: tests/peer_tokenizer.sh [--freeze | --speed [REPS]] [BUILD_DIR]     (default build)
# Exit 0 identical everywhere, 1 a difference or failure, 77 skipped (no peer installed).
set -euo pipefail
cd "$(dirname "$0")/.."
freeze=0 speed=0
if [ "${1:-}" = --freeze ]; then freeze=1; shift; fi
if [ "${1:-}" = --speed ]; then speed=5; shift; case ${1:-} in [0-9]*) speed=$1; shift;; esac; fi
build=${1:-build}
shared=../shared
PEER_DIR=${PEER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/decode-peer}
bins=$PEER_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ ! -f "$bins/libllama.v0.4.0.so" ] || [ ! -f "$PEER_DIR/include/llama.h" ] || ! command -v node >/dev/null; then
  echo "skipped: the llama.cpp peer is not installed in $PEER_DIR (bash $shared/peer/setup.sh installs it)"
  exit 77
fi
for t in tokenize gguf-synth; do
  [ -x "$build/bin/$t" ] || { echo "peer_tokenizer: $build/bin/$t not built" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=c11 -I"$PEER_DIR/include" tests/llama_tokenize.c -o "$tmp/llama_tokenize" -L"$bins" \
   -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$bins" -ldl -lm

# 1 MiB of the files' text, repeated: FILE... > OUT
mib() { local out=${!#}; cat "${@:1:$#-1}" > "$out.1"; while [ "$(stat -c %s "$out.1")" -lt 1048576 ]; do cat "$out.1" "$out.1" > "$out.2"; mv "$out.2" "$out.1"; done; head -c 1048576 "$out.1" > "$out"; rm "$out.1"; }
if [ $speed != 0 ]; then
  mib "$shared/testdata/vocab/ggml-vocab-falcon.gguf.inp" "$tmp/multilingual.txt"
  mib model/*.c tools/*.c "$tmp/code.txt"
  mib README.md docs/*.md "$tmp/prose.txt"
  "$build/bin/gguf-synth" "$tmp/llama-bpe.gguf" --vocab bpe --pre llama-bpe --n-vocab 32000 --n-embd 16 --n-layer 1 --n-head 2
  "$build/bin/gguf-synth" "$tmp/qwen2.gguf" --vocab bpe --pre qwen2 --n-vocab 32000 --n-embd 16 --n-layer 1 --n-head 2
  printf '%-24s %-13s %8s %12s %12s %6s\n' vocab text tokens decode_s llama.cpp_s ratio
  for v in falcon mpt refact starcoder deepseek-llm gpt-neox synth-llama-bpe synth-qwen2; do
    case $v in synth-*) f=$tmp/${v#synth-}.gguf;; *) f=$shared/testdata/vocab/ggml-vocab-$v.gguf;; esac
    for x in multilingual code prose; do
      ours=$("$build/bin/tokenize" -m "$f" --no-bos -f "$tmp/$x.txt" --time "$speed")
      theirs=$("$tmp/llama_tokenize" time "$f" "$tmp/$x.txt" "$speed")
      set -- $ours; n1=$2 s1=$4
      set -- $theirs; n2=$2 s2=$4
      [ "$n1" = "$n2" ] || { echo "peer_tokenizer: $v $x: $n1 tokens, llama.cpp $n2" >&2; exit 1; }
      printf '%-24s %-13s %8s %12s %12s %6.2f\n' "$v" "$x" "$n1" "$s1" "$s2" "$(echo "$s1 / $s2" | bc -l)"
    done
  done
  exit 0
fi

cat "$shared/testdata/vocab/ggml-vocab-falcon.gguf.inp" tests/tokenizer_stress/stress.inp > "$tmp/all.inp"
n_inp=$(grep -c '^__ggml_vocab_test__$' "$tmp/all.inp")
cat "$tmp/all.inp" tests/tokenizer_stress/special.inp > "$tmp/special.inp"
# SentencePiece takes an invalid UTF-8 byte alone where llama.cpp swallows the bytes after it
# (model/tokenizer.c, utf8_len): its vocabs get the valid texts only
cat "$shared/testdata/vocab/ggml-vocab-falcon.gguf.inp" tests/tokenizer_stress/special.inp > "$tmp/special-valid.inp"
fail=0 n_vocab=0 n_special=0

# ids of peer_tokenize.mjs (C driver) for one text: "with_bos|no_bos", ids space-separated
peer_script() {
  node "$shared/peer/peer_tokenize.mjs" --model "$1" --text "$2" --impl c |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
      if(j.error){console.log("error: "+j.error);return}
      console.log(j.with_bos.join(" ")+"|"+j.no_bos.join(" "))})'
}

# llama.cpp's ids (llama_tokenize MODE) against tokenize's (FLAGS) on every case of INP:
# 0 identical, else 1 after a FAIL line naming the first case that differs.
same_cases() {  # VOCAB LABEL INP MODE [FLAGS...]
  local v=$1 name=$2 inp=$3 mode=$4 n; shift 4
  n=$(grep -c '^__ggml_vocab_test__$' "$inp")
  "$tmp/llama_tokenize" "$mode" "$v" "$inp" | sed 's/^ //' > "$tmp/want"
  "$build/bin/tokenize" -m "$v" --no-bos "$@" --cases -f "$inp" > "$tmp/got"
  if [ "$(wc -l < "$tmp/want")" != "$n" ]; then echo "FAIL $name: llama.cpp gave $(wc -l < "$tmp/want") lines for $n cases"; fail=1; return 1; fi
  if ! cmp -s "$tmp/want" "$tmp/got"; then
    local k; k=$(diff "$tmp/want" "$tmp/got" | grep -m1 -o '^[0-9]*' || true)
    echo "FAIL $name: case $k (1-based) differs: llama.cpp '$(sed -n "${k}p" "$tmp/want")' decode '$(sed -n "${k}p" "$tmp/got")'"
    fail=1
    return 1
  fi
}

compare() {  # VOCAB LABEL
  local v=$1 name=$2 text="Hello world, it's 2024! 你好 <think>x"
  same_cases "$v" "$name" "$tmp/all.inp" cases || return
  local p ours
  p=$(peer_script "$v" "$text" || true)
  ours="$("$build/bin/tokenize" -m "$v" -p "$text")|$("$build/bin/tokenize" -m "$v" --no-bos -p "$text")"
  if [ "$p" != "$ours" ]; then echo "FAIL $name: peer_tokenize.mjs '$p', decode '$ours'"; fail=1; return; fi
  n_vocab=$((n_vocab + 1))
  echo "ok $name: $n_inp cases identical; BOS rule and ids identical through peer_tokenize.mjs"
  compare_special "$v" "$name"
}

compare_special() {  # VOCAB LABEL [INP]
  local inp=${3:-$tmp/special.inp}
  same_cases "$1" "$2, parse_special" "$inp" special --parse-special || return
  n_special=$((n_special + 1))
  echo "ok $2: $(grep -c '^__ggml_vocab_test__$' "$inp") cases identical with parse_special"
}

for v in falcon mpt refact starcoder deepseek-llm gpt-neox; do
  f=$shared/testdata/vocab/ggml-vocab-$v.gguf
  compare "$f" "$v"
  if [ $freeze = 1 ]; then
    "$tmp/llama_tokenize" cases "$f" tests/tokenizer_stress/stress.inp | sed 's/^ //' > "tests/tokenizer_stress/$v.out"
  fi
done
if [ $freeze = 1 ]; then   # parse_special's ids, for test_tokenizer without the peer
  for v in falcon mpt refact starcoder deepseek-llm gpt-neox llama-spm; do
    "$tmp/llama_tokenize" special "$shared/testdata/vocab/ggml-vocab-$v.gguf" tests/tokenizer_stress/special.inp |
      sed 's/^ //' > "tests/tokenizer_stress/$v.special.out"
  done
fi
for p in default gpt-2 llama-bpe llama3 llama-v3 qwen2 deepseek-llm deepseek-coder falcon mpt starcoder refact smollm olmo command-r; do
  "$build/bin/gguf-synth" "$tmp/synth.gguf" --vocab bpe --pre "$p" --n-vocab 3000 --n-embd 16 --n-layer 1 --n-head 2
  compare "$tmp/synth.gguf" "synth --pre $p"
done
for f in "$shared/testdata/vocab/ggml-vocab-llama-spm.gguf" "$shared/testdata/models/stories260K.gguf"; do
  compare_special "$f" "$(basename "$f" .gguf)" "$tmp/special-valid.inp"
done
if [ $fail != 0 ]; then echo "peer_tokenizer: FAILED"; exit 1; fi
echo "peer_tokenizer: $n_vocab vocabs x $n_inp cases identical to llama.cpp; $n_special vocabs with parse_special"
