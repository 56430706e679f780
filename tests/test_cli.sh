#!/usr/bin/env bash
# decode's command-line contract (docs/design.md, Interfaces): exit codes, one-line errors, stdout
# holding only the prompt and the pieces, --dump-logits row counts, thread-count invariance of the
# logits, --print-schedule's plan and stealing lines.
# usage: test_cli.sh BIN_DIR SHARED_DIR
set -u
bin=$(cd "$1" && pwd); shared=$(cd "$2" && pwd)   # absolute: some cases change directory
model=$shared/testdata/models/stories260K.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cases=0; fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# The CPUs decode may use, as it counts them: the affinity mask (nproc also heeds OMP_* and, in
# newer coreutils, a cgroup quota).
cpus=$(awk '/^Cpus_allowed_list:/ { n = 0; k = split($2, r, ","); for (i = 1; i <= k; i++) {
  if (split(r[i], a, "-") == 2) n += a[2] - a[1] + 1; else n++ }; print n }' /proc/self/status)
# sigint ERR PATTERN -- command...: runs the command (stdout to /dev/null, stderr to ERR), waits
# until it catches SIGINT and, unless PATTERN is empty, until ERR matches it (60 s at most), sends
# SIGINT and prints "SIGNAL STATUS" of its end: "0 130" is an exit with 130, not death by the
# signal (a shell shows 130 for both; perl, Debian's essential perl-base, tells them apart).
# "not ready" when it ended or timed out before that, "ignored SIGINT" when it still ran 60 s
# after it (killed, either way).
sigint() {
  local err=$1 pat=$2; shift 3
  perl -e 'my ($err, $pat) = (shift, shift);
    my $p = fork; if (!$p) { open STDOUT, ">/dev/null"; open STDERR, ">", $err; exec @ARGV; exit 127 }
    my $ended = sub { for (1 .. 1200) { return 1 if waitpid($p, 1) > 0; select(undef, undef, undef, 0.05) } 0 };
    for (1 .. 1200) {
      my ($cgt, $seen) = (0, $pat eq "");
      if (open my $f, "<", "/proc/$p/status") { for (<$f>) { $cgt = hex $1 if /^SigCgt:\s*([0-9a-f]+)/ } }
      if (!$seen && open my $e, "<", $err) { $seen = grep { /$pat/ } <$e> }
      if ($cgt & 2 && $seen) {
        kill "INT", $p;
        if (!$ended->()) { kill "KILL", $p; waitpid($p, 0); print "ignored SIGINT"; exit }
        print $? & 127, " ", $? >> 8; exit;
      }
      if (waitpid($p, 1) > 0) { print "not ready (it ended)"; exit }   # WNOHANG: reaped
      select(undef, undef, undef, 0.05);
    }
    kill "KILL", $p; waitpid($p, 0); print "not ready"' "$err" "$pat" "$@"
}
# expect STATUS DESCRIPTION -- command...: exit status and, for failures, exactly one stderr line.
expect() {
  local want=$1 what=$2; shift 3
  cases=$((cases + 1))
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  [ "$got" = "$want" ] || { fail "$what: exit $got, want $want: $(head -c 300 "$tmp/err")"; return; }
  if [ "$want" != 0 ]; then
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$what: stderr is not one line: $(cat "$tmp/err")"
    grep -q . "$tmp/out" && fail "$what: wrote to stdout"
  fi
}
d=$bin/decode
expect 0 "help" -- "$d" --help
grep -q -- "--repeat-penalty" "$tmp/out" || fail "help lacks --repeat-penalty"
expect 2 "no args" -- "$d"
expect 2 "unknown flag" -- "$d" -m "$model" --bogus
grep -q "unknown option '--bogus'" "$tmp/err" || fail "unknown last flag not named: $(cat "$tmp/err")"
expect 2 "missing value" -- "$d" -m "$model" -n
expect 2 "bad number" -- "$d" -m "$model" -n 12x
expect 2 "zero threads" -- "$d" -m "$model" -t 0
# An out-of-range number's error gives the range.
expect 2 "--split-k past its range" -- "$d" -m "$model" -p hi --split-k 65537
grep -q "N from 2 to 65536" "$tmp/err" || fail "--split-k 65537: $(cat "$tmp/err")"
expect 2 "-n past its range" -- "$d" -m "$model" -p hi -n 2147483648
grep -q "(-1..2147483647)" "$tmp/err" || fail "-n 2147483648: $(cat "$tmp/err")"
expect 2 "bad temp" -- "$d" -m "$model" --temp nan
expect 0 "temp that underflows to 0" -- "$d" -m "$model" -p hi -n 1 --temp 1e-50
for pen in 1e-50 1e-400; do   # below float's range, and below double's too
  expect 2 "repeat penalty $pen, which underflows to 0" -- "$d" -m "$model" -p hi --repeat-penalty $pen
  grep -q "below the smallest float, it reads as 0" "$tmp/err" || fail "underflowed penalty not explained: $(cat "$tmp/err")"
done
expect 2 "seed with a space before its minus" -- "$d" -m "$model" -p hi --seed ' -5'
expect 0 "seed with a plus, as std::stoul reads it" -- "$d" -m "$model" -p hi -n 1 --seed +42
expect 2 "both -p and -f" -- "$d" -m "$model" -p a -f /dev/null
expect 1 "missing model" -- "$d" -m "$tmp/none.gguf" -p hi
expect 1 "not a gguf" -- "$d" -m /etc/hostname -p hi
expect 1 "directory" -- "$d" -m "$tmp" -p hi
expect 1 "vocab-only file" -- "$d" -m "$shared/testdata/vocab/ggml-vocab-llama-spm.gguf" -p hi
expect 1 "prompt file missing" -- "$d" -m "$model" -f "$tmp/none.txt"
expect 1 "context too small" -- "$d" -m "$model" -p "Once upon a time there was" -c 3
grep -q "at least 4 tokens with BOS: more than the 3 the context holds" "$tmp/err" ||
  fail "prompt-too-long message does not count BOS: $(cat "$tmp/err")"
expect 0 "context past training" -- "$d" -m "$model" -p "Once" -n 1 --temp 0 -c 2100
grep -q "warning: -c 2100 is more than the 2048 positions" "$tmp/err" || fail "no warning for -c past context_length"
# -c 0 is the model's whole context_length (llama.cpp's meaning); no -c caps it at 4096.
"$bin/gguf-synth" "$tmp/c5000.gguf" --n-embd 48 --n-layer 1 --n-head 4 --n-kv-head 2 --n-ff 96 --n-vocab 300 --ctx 5000 --dtype f16 --seed 3 >/dev/null || fail "gguf-synth --ctx 5000"
for c in "0 5000" "- 4096" "100 100"; do
  set -- $c
  if [ "$1" = - ]; then expect 0 "default -c" -- "$d" -m "$tmp/c5000.gguf" -p hi -n 1 --temp 0 -v
  else expect 0 "-c $1" -- "$d" -m "$tmp/c5000.gguf" -p hi -n 1 --temp 0 -v -c "$1"; fi
  grep -q "for $2 positions" "$tmp/err" || fail "-c $1: not $2 positions: $(grep 'KV cache' "$tmp/err")"
done
expect 1 "empty prompt without BOS" -- "$d" -m "$model" -p "" --no-bos
expect 1 "dump path unwritable" -- "$d" -m "$model" -p hi --dump-logits "$tmp/no/such/dir/x"
# The dump is never the prompt, whatever kind of file that is: a FIFO whose writer has gone (its
# open would block for ever) or the pipe behind /dev/stdin (decode holds its only reader).
mkfifo "$tmp/fifo"
printf Lily >"$tmp/fifo" & writer=$!
expect 1 "dump into the prompt's FIFO" -- timeout 60 "$d" -m "$model" -f "$tmp/fifo" -n 4 --dump-logits "$tmp/fifo"
grep -q "is the prompt file; not overwriting it" "$tmp/err" || fail "dump into the prompt's FIFO: $(cat "$tmp/err")"
kill $writer 2>/dev/null; wait $writer 2>/dev/null   # still blocked in its open where decode never read
expect 1 "dump into the prompt's pipe" -- sh -c 'printf Lily | timeout 60 "$1" -m "$2" -f /dev/stdin -n 4 --dump-logits /dev/stdin' sh "$d" "$model"
# ... nor stdin's pipe when the prompt is -p: decode holds its only reader and never reads it
expect 1 "dump into stdin's pipe" -- sh -c 'printf Lily | timeout 60 "$1" -m "$2" -p hi -n 4 --dump-logits /dev/stdin' sh "$d" "$model"
grep -q "is where stdin comes from" "$tmp/err" || fail "dump into stdin's pipe: $(cat "$tmp/err")"
# No cache directory where HOME is relative or missing (mkdir -p made ./rel/.cache, or HOME itself)
expect 0 "relative HOME" -- sh -c 'cd "$1" && env -u XDG_CACHE_HOME HOME=rel "$2" -m "$3" -p hi -n 1' sh "$tmp" "$d" "$model"
expect 0 "missing HOME" -- env -u XDG_CACHE_HOME HOME="$tmp/nohome" "$d" -m "$model" -p hi -n 1
[ ! -e "$tmp/rel" ] && [ ! -e "$tmp/nohome" ] || fail "a cache directory made under a relative or missing HOME"

# stdout is the prompt, exactly, then the pieces; stderr carries the timings.
prompt='Once upon a  time,	"odd" \n spacing'
expect 0 "greedy run" -- "$d" -m "$model" -p "$prompt" -n 16 --temp 0 -t 1 --dump-logits "$tmp/l1"
out=$(cat "$tmp/out"; echo x); out=${out%x}
[ "${out:0:${#prompt}}" = "$prompt" ] || fail "stdout does not start with the prompt"
[ ${#out} -gt ${#prompt} ] || fail "nothing generated"
grep -q "eval" "$tmp/err" || fail "no timing summary on stderr"
grep -q "{" "$tmp/err" && fail "a '{' on stderr"
# Rows: P prompt tokens (BOS included) + N - 1.
p=$("$bin/tokenize" -m "$model" -p "$prompt" | wc -w)
rows=$(( $(stat -c %s "$tmp/l1") / (512 * 4) ))
[ "$rows" = $((p + 16 - 1)) ] || fail "dump has $rows rows, want $((p + 15))"
# Same logits, bit for bit, at 1, 2 and 3 threads (3 > the CPUs of a 2-core machine).
for t in 2 3; do
  expect 0 "greedy -t $t" -- "$d" -m "$model" -p "$prompt" -n 16 --temp 0 -t $t --dump-logits "$tmp/l$t"
  cmp -s "$tmp/l1" "$tmp/l$t" || fail "logits at -t $t differ from -t 1"
done
# An f16 KV cache: the same bits at any thread count, on the scalar path and one token at a time
# (-b 1), and not those of the f32 cache (the rows are rounded).
for t in 1 2 3; do
  expect 0 "f16 cache -t $t" -- "$d" -m "$model" -p "$prompt" -n 16 --temp 0 -t $t -ctk f16 --cache-type-v f16 --dump-logits "$tmp/h$t"
done
cmp -s "$tmp/h1" "$tmp/h2" && cmp -s "$tmp/h1" "$tmp/h3" || fail "f16 cache: logits differ across thread counts"
expect 0 "f16 cache scalar -b 1" -- env DECODE_ISA=scalar "$d" -m "$model" -p "$prompt" -n 16 --temp 0 -t 2 -b 1 -ctk f16 -ctv f16 --dump-logits "$tmp/hs"
cmp -s "$tmp/h1" "$tmp/hs" || fail "f16 cache: scalar -b 1 logits differ"
cmp -s "$tmp/h1" "$tmp/l1" && fail "f16 cache: logits equal to the f32 cache's"
# head_dim 12 (a partial 8-block: the row tails of the f16 stores and loads), 2 KV heads
hd12=$tmp/hd12.gguf
"$bin/gguf-synth" "$hd12" --n-embd 48 --n-layer 2 --n-head 4 --n-kv-head 2 --head-dim 12 --n-ff 96 --n-vocab 300 --ctx 64 --dtype f16 --seed 3 >/dev/null || fail "gguf-synth --head-dim 12"
expect 0 "f16 cache hd12 -t 1" -- "$d" -m "$hd12" -p "$prompt" -n 24 --temp 0 -t 1 -ctk f16 -ctv f16 --dump-logits "$tmp/g1"
expect 0 "f16 cache hd12 -t 3 scalar" -- env DECODE_ISA=scalar "$d" -m "$hd12" -p "$prompt" -n 24 --temp 0 -t 3 -ctk f16 -ctv f16 --dump-logits "$tmp/g3"
cmp -s "$tmp/g1" "$tmp/g3" || fail "f16 cache, head_dim 12: logits differ at -t 3 on the scalar path"
expect 2 "bad -ctk" -- "$d" -m "$model" -p hi -ctk q8_0
grep -q "bad -ctk value 'q8_0'" "$tmp/err" || fail "bad -ctk not named: $(cat "$tmp/err")"
# -p "": BOS only. -n N always dumps P + N - 1 rows: -n 1 one row, -n 0 none.
expect 0 "empty prompt" -- "$d" -m "$model" -p "" -n 1 --dump-logits "$tmp/l0"
[ "$(stat -c %s "$tmp/l0")" = 2048 ] || fail "-p '' -n 1 should dump exactly one row"
expect 0 "empty prompt, -n 0" -- "$d" -m "$model" -p "" -n 0 --dump-logits "$tmp/l0"
[ "$(stat -c %s "$tmp/l0")" = 0 ] || fail "-p '' -n 0 should dump no row"
[ -s "$tmp/out" ] && fail "-n 0 printed something"
expect 0 "prompt, -n 0" -- "$d" -m "$model" -p "Once upon a time" -n 0 --dump-logits "$tmp/l0"
[ "$(stat -c %s "$tmp/l0")" = $(( ($("$bin/tokenize" -m "$model" -p "Once upon a time" | wc -w) - 1) * 2048 )) ] ||
  fail "-n 0 should dump P - 1 rows"
# Many more threads than CPUs is allowed.
expect 0 "64 threads" -- "$d" -m "$model" -p "Once" -n 4 --temp 0 -t 64
# A closed, full or broken stdout is a one-line failure, never a signal.
cases=$((cases + 3))
"$d" -m "$model" -p "Once" -n 8 --temp 0 >&- 2>"$tmp/err"; st=$?
[ "$st" = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || fail "closed stdout: exit $st: $(cat "$tmp/err")"
"$d" -m "$model" -p "Once" -n 8 --temp 0 >/dev/full 2>"$tmp/err"; st=$?
[ "$st" = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || fail "full stdout: exit $st: $(cat "$tmp/err")"
# decode-bench too: its table lost to a full or closed stdout is a failure, named on stderr.
cases=$((cases + 2))
for to in /dev/full closed; do
  if [ $to = closed ]; then "$bin/decode-bench" -m "$model" -t 1 -p 0 -n 1 -r 1 --roofline-mib 0 -o jsonl >&- 2>"$tmp/err"
  else "$bin/decode-bench" -m "$model" -t 1 -p 0 -n 1 -r 1 --roofline-mib 0 -o csv >$to 2>"$tmp/err"; fi
  st=$?
  [ "$st" = 1 ] && tail -1 "$tmp/err" | grep -q "writing the results to stdout failed" ||
    fail "decode-bench, $to stdout: exit $st: $(tail -1 "$tmp/err")"
done
# The tools that run kernels check DECODE_TUNE, DECODE_ISA and DECODE_WAIT_PREFETCH (a typo must not
# silently re-measure, run another path or prefetch the default); decode-bench refuses more models
# than it holds; gemv-bench's table lost to a full stdout is a failure.
expect 2 "decode-bench DECODE_TUNE typo" -- env DECODE_TUNE=of "$bin/decode-bench" -m "$model"
grep -q "DECODE_TUNE must be off or force, got 'of'" "$tmp/err" || fail "decode-bench: $(cat "$tmp/err")"
expect 2 "gemv-bench DECODE_ISA typo" -- env DECODE_ISA=AVX2 "$bin/gemv-bench" -s 64x64 -t 1
expect 2 "gemm-bench DECODE_ISA typo" -- env DECODE_ISA=avx "$bin/gemm-bench" -m 1 -t 1
expect 2 "decode DECODE_WAIT_PREFETCH typo" -- env DECODE_WAIT_PREFETCH=256k "$d" -m "$model" -p a -n 1
grep -q "DECODE_WAIT_PREFETCH must be a number of bytes" "$tmp/err" || fail "decode: $(cat "$tmp/err")"
expect 2 "decode-bench DECODE_PLAN typo" -- env DECODE_PLAN=wide "$bin/decode-bench" -m "$model"
grep -q "DECODE_PLAN must be auto, fixed or alternate, got 'wide'" "$tmp/err" || fail "decode-bench: $(cat "$tmp/err")"
# stories260K's step runs on one thread; the plan over both starts where -v and --print-schedule
# say, at the same position, and not at all where the context ends first or DECODE_PLAN=fixed. It
# takes at most the CPUs decode may use: with one, each run says so instead.
one_cpu() {
  [ "$cpus" -lt 2 ] || return 1
  grep -q "^decode: \.\.\. and no plan over all 2 (DECODE_PLAN): only one CPU to run on$" "$tmp/err" ||
    fail "$1 on one CPU: $(grep -i plan "$tmp/err")"
}
[ "$cpus" -lt 2 ] && echo "decode cli: one CPU: the plan over all threads checked as absent"
expect 0 "plan over all threads" -- "$d" -m "$model" -p a -n 1 -c 2048 -t 2 -v --print-schedule
from=$(sed -n 's/^decode: \.\.\. and all 2 from position \([0-9]*\) on, .*/\1/p' "$tmp/err")
one_cpu "plan over all threads" ||
  { [ -n "$from" ] &&
    grep -q "^schedule: tokens at positions $from and on run the plan over all 2 threads" "$tmp/err" ||
    fail "plan over all threads: $(grep -E "position" "$tmp/err")"; }
expect 0 "no plan over all threads, short context" -- "$d" -m "$model" -p a -n 1 -c 256 -t 2 -v
grep -q "from position" "$tmp/err" && fail "-c 256: $(grep position "$tmp/err")"
grep -q "^decode: \.\.\. and no plan over all 2 (DECODE_PLAN): no position of this context streams" "$tmp/err" ||
  fail "-c 256 does not say why there is no plan over all threads: $(grep -i plan "$tmp/err")"
expect 0 "plan over all threads, alternate" -- env DECODE_PLAN=alternate "$d" -m "$model" -p a -n 8 -c 64 -t 2 -v
one_cpu "alternate" || grep -q "^decode: tokens run by 1 thread(s): [1-9][0-9]*, by all 2: [1-9]" "$tmp/err" ||
  fail "alternate: $(grep -E "tokens run|all 2" "$tmp/err")"
expect 0 "no plan over all threads, fixed" -- env DECODE_PLAN=fixed "$d" -m "$model" -p a -n 1 -c 2048 -t 2 -v --print-schedule
grep -q "from position\|tokens at positions" "$tmp/err" && fail "DECODE_PLAN=fixed: $(grep position "$tmp/err")"
grep -q "^decode: \.\.\. and no plan over all 2 (DECODE_PLAN): DECODE_PLAN=fixed$" "$tmp/err" &&
  grep -q "^schedule: no plan over all threads (DECODE_PLAN): DECODE_PLAN=fixed$" "$tmp/err" ||
  fail "DECODE_PLAN=fixed does not say why: $(grep -i plan "$tmp/err")"
expect 0 "no plan over all threads, two pretend nodes" -- env DECODE_FAKE_NUMA=2 "$d" -m "$model" -p a -n 1 -c 2048 -t 2 -v
one_cpu "two pretend nodes" ||
  grep -q "^decode: \.\.\. and no plan over all 2 (DECODE_PLAN): its KV cache would span NUMA nodes$" "$tmp/err" ||
  fail "two pretend nodes: $(grep -i plan "$tmp/err")"
expect 0 "no plan over all threads, isolate" -- env DECODE_FAKE_NUMA=2 "$d" -m "$model" -p a -n 1 -c 2048 -t 2 \
  --numa isolate -v
one_cpu "isolate" ||
  grep -q "^decode: \.\.\. and no plan over all 2 (DECODE_PLAN): the starting node has one CPU (--numa isolate)$" \
  "$tmp/err" || fail "isolate on a pretend node of one CPU: $(grep -i plan "$tmp/err")"
# The step tune runs on the tokens' own steps. stories260K's step (~1.1 MiB) is timed where it
# streams more than the resident bytes a thread, on a SIMD path: there -v must say how far the tune got, counting
# every one-token step, the prompt's at -b 1 and the generated ones' (each but the last runs one),
# and no time of its own is left out of the rates. DECODE_TUNE=off times nothing. decode-bench's
# warmup runs on until the tune has picked, the wide plan's too where one serves within the test
# (from position 787 at -n 1000; from the first under DECODE_PLAN=alternate).
for tune in "" off; do
  expect 0 "step tune, DECODE_TUNE='$tune'" -- env DECODE_TUNE="$tune" "$d" -m "$model" -p "Once upon" -n 24 -b 1 -t 1 --temp 0 -v
  np=$(sed -n 's/^decode: prompt eval .* \/ *\([0-9]*\) tokens.*/\1/p' "$tmp/err")
  ne=$(sed -n 's/^decode: eval .* \/ *\([0-9]*\) tokens.*/\1/p' "$tmp/err")
  ran=$(sed -n 's/^decode: step tune: not settled: \([0-9]*\) of its .*/\1/p' "$tmp/err")
  resident=$(sed -n 's/.*resident (<= \([0-9]*\) KiB a thread).*/\1/p' "$tmp/err")
  picks=$(grep -c "^decode: step tune" "$tmp/err")
  [ -z "$tune" ] && timed=$([ "${resident:-0}" -lt 1024 ] && ! grep -q "gemv tuning: scalar" "$tmp/err" && echo 1)
  if [ -n "$tune" ]; then [ "$picks" = 0 ] || fail "step tune under off: $(grep "step tune" "$tmp/err")"
  elif [ -n "$timed" ]; then
    [ "$ran" = $((np + ne)) ] || fail "step tune: '$ran' steps of $np + $ne: $(grep "step tune" "$tmp/err")"
  fi
  for phase in "prompt eval" "eval"; do
    rate=$(sed -n "s/^decode: $phase  *\([0-9.-]*\) ms .*/\1/p" "$tmp/err")
    awk -v r="$rate" 'BEGIN { exit !(r > 0) }' || fail "step tune ($tune): $phase took '$rate' ms"
  done
done
for run in "1 500 auto" "2 1000 auto" "2 64 alternate"; do
  read -r t n plan <<<"$run"
  # A first step slower than any the L3 holds ends the tune with no pick: a preempted thread (two
  # tests at once on two CPUs) can do that once, so such a run is tried again, once.
  for try in 1 2; do
    expect 0 "decode-bench settles the step tune, -t $t -n $n, $plan" -- env DECODE_PLAN=$plan "$bin/decode-bench" \
      -m "$model" -t $t -p 0 -n $n -r 1 --roofline-mib 0
    line=$(grep "step tune: " "$tmp/err")
    grep -q "none: a step took over" <<<"$line" && [ $try = 1 ] || break
    cases=$((cases - 1))             # the same case, tried again
    echo "decode-bench -t $t -n $n, $plan: a preempted first step? trying again: $line"
  done
  [ -z "$timed" ] || { [ -n "$line" ] && ! grep -q "not settled" <<<"$line" &&
    { [ $t = 1 ] || [ "$cpus" -lt 2 ] || grep -q "the plan over all 2 threads: prefetch" <<<"$line"; }; } ||
    fail "decode-bench -t $t -n $n, $plan: the step tune is not settled: '$line'"
done
expect 2 "decode-bench 33 models" -- "$bin/decode-bench" -m "$(printf "$model,%.0s" $(seq 33))"
cases=$((cases + 1))
"$bin/gemv-bench" -s 64x64 -t 1 -d f16 -r 7 >/dev/full 2>"$tmp/err"; st=$?
[ "$st" = 1 ] && tail -1 "$tmp/err" | grep -q "writing the table to stdout failed" ||
  fail "gemv-bench, full stdout: exit $st: $(tail -1 "$tmp/err")"
# An end-of-generation token before -n stops the run and says so, as a full context does; the
# count it gives is the eval line's. --ignore-eos never draws one, so goes on to -n (the last token
# needs no forward).
eog=$tmp/eog.gguf
"$bin/gguf-synth" "$eog" --n-embd 64 --n-layer 2 --n-head 4 --n-kv-head 2 --n-ff 128 --n-vocab 300 --ctx 64 --dtype f16 --seed 1 >/dev/null || fail "gguf-synth eog"
sample=(-p a -n 60 -s 2 --temp 1 --top-k 0 --top-p 1 --min-p 0 -t 1 --pack-cache off)
expect 0 "end of generation" -- "$d" -m "$eog" "${sample[@]}"
n=$(sed -n 's/^decode: end-of-generation token [0-9]* after \([0-9]*\) tokens; stopping$/\1/p' "$tmp/err")
[ -n "$n" ] && [ "$n" -lt 59 ] && grep -q "^decode: eval .*/ *$n tokens" "$tmp/err" || fail "end of generation not said: $(cat "$tmp/err")"
expect 0 "--ignore-eos" -- "$d" -m "$eog" "${sample[@]}" --ignore-eos
grep -q "end-of-generation" "$tmp/err" && fail "--ignore-eos: $(cat "$tmp/err")"
grep -q "^decode: eval .*/ *59 tokens" "$tmp/err" || fail "--ignore-eos stopped early: $(grep 'eval' "$tmp/err")"
# stories260K's step is too small to share: one thread works at -t 2 (at -c 512 no position's step
# grows big enough either), and both tools say so.
expect 0 "threads in use" -- "$d" -m "$model" -p a -n 1 --temp 0 -t 2 -c 512 -v
grep -q "^decode: threads in use: 1 of 2 (the others stay idle" "$tmp/err" || fail "decode -v: $(grep threads "$tmp/err")"
said=$(sed -n 's/^decode: threads in use: //p; s/^decode: \.\.\. /... /p' "$tmp/err")
expect 0 "decode-bench threads in use" -- "$bin/decode-bench" -m "$model" -t 2 -p 0 -n 2 -r 1 --roofline-mib 0
grep -q "^decode-bench: .*: threads in use: 1 of 2 (the others" "$tmp/err" || fail "decode-bench: no threads-in-use line"
# one function words both tools' lines: the same text after the name (and decode-bench's path)
[ "$(sed -n 's/^decode-bench: .*: threads in use: //p; s/^decode-bench: .*: \.\.\. /... /p' "$tmp/err")" = "$said" ] ||
  fail "decode and decode-bench say threads in use differently: '$said' / $(grep -A1 'threads in use' "$tmp/err")"
expect 0 "threads in use, -t without -v" -- "$d" -m "$model" -p a -n 1 --temp 0 -t 2 -c 512
grep -q "^decode: threads in use: 1 of 2 (the others stay idle" "$tmp/err" || fail "decode -t 2: $(cat "$tmp/err")"
# ... not idle where the plan over all of them serves from some position on: the next line says where
expect 0 "threads in use, a plan over all from a position" -- "$d" -m "$model" -p a -n 1 --temp 0 -t 2 -c 2048
{ grep -qx "decode: threads in use: 1 of 2" "$tmp/err" && grep -q "^decode: ... and all 2 from position" "$tmp/err"; } ||
  one_cpu "plan from a position" || fail "decode -t 2 -c 2048: $(grep -A1 threads "$tmp/err")"
expect 0 "threads in use, the default" -- "$d" -m "$model" -p a -n 1 --temp 0
grep -q "threads in use" "$tmp/err" && fail "decode without -t or -v said threads in use"
expect 0 "threads in use, all" -- "$d" -m "$model" -p a -n 1 --temp 0 -t 1 -v
grep -qx "decode: threads in use: 1 of 1" "$tmp/err" || fail "decode -v -t 1: $(grep threads "$tmp/err")"
expect 0 "decode-bench threads in use, all" -- "$bin/decode-bench" -m "$model" -t 1 -p 0 -n 2 -r 1 --roofline-mib 0
grep -q "threads in use" "$tmp/err" && fail "decode-bench -t 1 said threads in use"
# The reader of a pipe leaving early: whether decode notices depends on timing, a signal never.
"$d" -m "$model" -p "Once" -n 2000 --ignore-eos --temp 0 2>/dev/null | head -c 1 >/dev/null
st=${PIPESTATUS[0]}
[ "$st" -le 1 ] || fail "broken pipe: exit $st"
# -f reads the file's bytes exactly, and evaluates what tokenize -f prints.
printf 'Once upon\n' >"$tmp/p.txt"
expect 0 "prompt file" -- "$d" -m "$model" -f "$tmp/p.txt" -n 1 --temp 0 --dump-logits "$tmp/lf"
cmp -s <(head -c 10 "$tmp/out") "$tmp/p.txt" || fail "-f prompt not echoed byte for byte"
pf=$("$bin/tokenize" -m "$model" -f "$tmp/p.txt" | wc -w)
[ "$(stat -c %s "$tmp/lf")" = $((pf * 2048)) ] || fail "-f dump rows differ from tokenize -f"
# -f /dev/stdin with stdin closed is an error, not the empty text of the /dev/null kept in its place
for tool in decode tokenize; do
  cases=$((cases + 1))
  "$bin/$tool" -m "$model" -f /dev/stdin <&- >"$tmp/out" 2>"$tmp/err"; st=$?
  [ "$st" = 1 ] && grep -qx "$tool: /dev/stdin: Bad file descriptor" "$tmp/err" || fail "$tool -f /dev/stdin, closed: exit $st: $(cat "$tmp/err")"
done
# --parse-special: <s> and </s> become their tokens (BOS, <s>, Once, </s>: 4), as tokenize
# --parse-special prints them; without it they are text. stdout is the prompt as given.
for sp in "" --parse-special; do
  expect 0 "prompt with control text $sp" -- "$d" -m "$model" -p "<s>Once</s>" -n 1 --temp 0 --dump-logits "$tmp/ls" $sp
  [ "$(head -c 11 "$tmp/out")" = "<s>Once</s>" ] || fail "$sp: prompt not echoed: $(head -c 40 "$tmp/out")"
  ps=$("$bin/tokenize" -m "$model" -p "<s>Once</s>" $sp | wc -w)
  [ "$(stat -c %s "$tmp/ls")" = $((ps * 2048)) ] || fail "$sp: dump rows differ from tokenize $sp"
  [ -n "$sp" ] && [ "$ps" != 4 ] && fail "--parse-special: $ps tokens, want 4"
  [ -z "$sp" ] && [ "$ps" -le 4 ] && fail "control text parsed without --parse-special ($ps tokens)"
done
# The timings are stderr's last three lines on every run, a phase that ran no token at 0.
for n in 0 1 3; do
  expect 0 "timings, -n $n" -- "$d" -m "$model" -p "Once" -n $n --temp 0
  tail -3 "$tmp/err" | sed 's/[0-9.]\+/N/g; s/  */ /g; s/( /(/' >"$tmp/tl"
  ne=$((n > 1 ? n - 1 : 0))
  printf 'decode: load N ms\ndecode: prompt eval N ms / N tokens (N ms/token, N tok/s)\ndecode: eval N ms / N tokens (N ms/token, N tok/s)\n' |
    cmp -s - "$tmp/tl" && grep -q "^decode: eval .*/ *$ne tokens" "$tmp/err" || fail "timings, -n $n: $(tail -3 "$tmp/err")"
done
# --l4-stats's line is the only '{' on stderr, a brace of the prompt's under --verbose-prompt too.
expect 0 "braces under --verbose-prompt" -- "$d" -m "$model" -p "a{b}" -n 2 --temp 0 --l4-stats --verbose-prompt
[ "$(grep -c '{' "$tmp/err")" = 1 ] && grep -q '^{"lookups"' "$tmp/err" && grep -qF "'\\x7b'" "$tmp/err" ||
  fail "a brace besides the stats: $(grep '{\|x7b' "$tmp/err")"
# ... and a path's: the cache directory's with the stats, a missing model's alone
expect 0 "braces in a path" -- env XDG_CACHE_HOME="$tmp/{c}" "$d" -m "$model" -p hi -n 2 --temp 0 --l4-stats
[ "$(grep -c '{' "$tmp/err")" = 1 ] && grep -q '^{"lookups"' "$tmp/err" && grep -qF '\x7bc\x7d/decode/packed/' "$tmp/err" ||
  fail "braces in a path: $(cat "$tmp/err")"
expect 1 "braces in a missing model's path" -- "$d" -m "$tmp/{none}.gguf" -p hi
grep -q '[{}]' "$tmp/err" || ! grep -qF '\x7bnone\x7d.gguf' "$tmp/err" && fail "braces in a missing model's path: $(cat "$tmp/err")"
# --verbose-prompt: the ids and texts on stderr, control tokens by name, a piece as it reads
expect 0 "verbose prompt" -- "$d" -m "$model" -p "<s>Once</s>" --parse-special --verbose-prompt -n 1 --temp 0
printf "decode: prompt: 4 tokens\ndecode:        1 '<s>'\ndecode:        1 '<s>'\ndecode:      403 ' Once'\ndecode:        2 '</s>'\n" >"$tmp/vp"
head -5 "$tmp/err" | cmp -s - "$tmp/vp" || fail "--verbose-prompt: $(head -5 "$tmp/err")"
# Sampling is deterministic for a seed.
expect 0 "seeded a" -- "$d" -m "$model" -p "Once" -n 32 --temp 0.9 -s 42
cp "$tmp/out" "$tmp/sa"
expect 0 "seeded b" -- "$d" -m "$model" -p "Once" -n 32 --temp 0.9 -s 42 --repeat-penalty 1.1
expect 0 "seeded c" -- "$d" -m "$model" -p "Once" -n 32 --temp 0.9 -s 42
cmp -s "$tmp/out" "$tmp/sa" || fail "same seed, different text"
# -s -1 is llama.cpp's "random": accepted, and the seed drawn is printed (also after a fixed -s)
expect 0 "seed -1" -- "$d" -m "$model" -p "Once" -n 4 --temp 0.9 -s 42 -s -1
grep -q "^decode: seed [0-9]" "$tmp/err" || fail "-s -1: no seed printed: $(cat "$tmp/err")"
expect 2 "seed -2" -- "$d" -m "$model" -p "Once" -n 4 -s -2
# A byte-level BPE vocab (qwen2: no BOS by default): the prompt comes back byte for byte through
# the GPT-2 byte map, and decode evaluates what tokenize prints.
bpe=$tmp/bpe.gguf
"$bin/gguf-synth" "$bpe" --vocab bpe --pre qwen2 --n-vocab 3000 --n-embd 32 --n-layer 1 --n-head 2 || fail "gguf-synth --vocab bpe"
bprompt=$'Hello world, it\'s 2024!\t你好 👍🏽 café\r\n  x'
expect 0 "bpe greedy run" -- "$d" -m "$bpe" -p "$bprompt" -n 8 --temp 0 --dump-logits "$tmp/lb"
out=$(cat "$tmp/out"; echo x); out=${out%x}
[ "${out:0:${#bprompt}}" = "$bprompt" ] || fail "bpe: stdout does not start with the prompt"
pb=$("$bin/tokenize" -m "$bpe" -p "$bprompt" | wc -w)
[ "$(stat -c %s "$tmp/lb")" = $(( (pb + 8 - 1) * 3000 * 4 )) ] || fail "bpe: dump rows differ from tokenize"
expect 0 "bpe empty text" -- "$bin/tokenize" -m "$bpe" -p ""
[ "$(od -An -c "$tmp/out" | tr -d ' ')" = '\n' ] || fail "bpe: empty text gives ids (no BOS for qwen2)"
# The same vocab without a token for byte 0x03's character (U+0103 renamed in place to U+017F, the
# same length): a run of 0x03 vanishes, as in llama.cpp. decode says so with -v, counts -p by its
# tokens, refuses an over-long -f saying the limit proves nothing here, and names a prompt whose
# bytes all vanish.
drop=$tmp/drop.gguf
cp "$bpe" "$drop"
at=$(LC_ALL=C grep -obUaP '\x02\x00\x00\x00\x00\x00\x00\x00\xc4\x83' "$drop" | head -1 | cut -d: -f1)
[ -n "$at" ] && printf '\xc5\xbf' | dd of="$drop" bs=1 seek=$((at + 8)) conv=notrunc status=none ||
  fail "drop: byte 0x03's character not found"
expect 0 "drop -v" -- "$d" -m "$drop" -p "a" -n 1 --temp 0 -v
grep -q "no token for some bytes: text can lose them" "$tmp/err" || fail "drop: -v does not say so"
ctl=$(head -c 4000 /dev/zero | tr '\0' '\003')
expect 0 "drop: a long -p of vanishing bytes" -- "$d" -m "$drop" -p "a${ctl}b" -n 1 --temp 0 -c 16
printf '%s' "$ctl" >"$tmp/ctl.txt"
expect 1 "drop: a long -f" -- "$d" -m "$drop" -f "$tmp/ctl.txt" -n 1 -c 16
grep -q "this vocabulary drops bytes it has no token for, so fewer tokens might have done" "$tmp/err" ||
  fail "drop -f: $(cat "$tmp/err")"
expect 1 "drop: every byte vanishes" -- "$d" -m "$drop" -p $'\003\003' -n 1
grep -q "the prompt's 2 bytes give no token" "$tmp/err" || fail "drop all: $(cat "$tmp/err")"

# --print-schedule: the plan, each thread's waits, and how the stolen stages hand out tiles (off:
# whole tiles; on cuts the tails; auto as the CPU's row says); stories260K runs on one thread
# at -t 2 (under the step threshold) and steals nothing.
sched=$tmp/sched.gguf
"$bin/gguf-synth" "$sched" --n-embd 512 --n-layer 2 --n-head 8 --n-kv-head 4 --n-ff 1376 --n-vocab 2000 --ctx 64 --dtype f16 --seed 7 >/dev/null || fail "gguf-synth 512"
expect 0 "print-schedule -t 2" -- "$d" -m "$sched" -p a -n 1 --temp 0 -t 2 --print-schedule --tail-split off
grep -q "^schedule: 2 threads" "$tmp/err" && grep -q "^thread 1 (node 0)" "$tmp/err" &&
  grep -q "^  wo      whole tiles$" "$tmp/err" && grep -q "^  down    whole tiles$" "$tmp/err" ||
  fail "print-schedule -t 2: $(cat "$tmp/err")"
# auto cuts the tails where a share has the CPU row's count of takers, which -v's tuning line
# gives: at -t 2 (two takers a share) it cuts exactly when that count is 2
expect 0 "print-schedule -t 2 --tail-split auto" -- "$d" -m "$sched" -p a -n 1 --temp 0 -t 2 --print-schedule -v --tail-split auto
takers=$(sed -n 's/.*tail split (auto) from \([0-9]*\) takers.*/\1/p' "$tmp/err" | head -1)
[ -n "$takers" ] && [ "$takers" -ge 2 ] || fail "-v: no tail split takers in the tuning line: $(cat "$tmp/err")"
if [ "$takers" = 2 ]; then want="^  down    whole tiles, then the last tile"; else want="^  down    whole tiles$"; fi
grep -q "$want" "$tmp/err" || fail "--tail-split auto from $takers takers at -t 2: $(cat "$tmp/err")"
# --numa off is no NUMA handling: two pretend nodes, yet every thread on node 0 (and the cache
# file not refused for spanning nodes, as a schedule over two nodes is: -v says why a cache is not
# used); distribute spreads them.
for mode in off distribute; do
  want=$([ $mode = off ] && echo 0 || echo 1)
  expect 0 "print-schedule --numa $mode" -- env DECODE_FAKE_NUMA=2 "$d" -m "$sched" -p a -n 1 --temp 0 -t 2 --numa $mode --pack-cache auto --print-schedule -v
  grep -q "^thread 1 (node $want)" "$tmp/err" || fail "--numa $mode on two pretend nodes: thread 1 not on node $want: $(grep '^thread' "$tmp/err")"
  span=$(grep -c "not used: the threads span NUMA nodes" "$tmp/err")
  [ "$span" = $([ $mode = off ] && echo 0 || echo 1) ] || fail "--numa $mode: the cache refused for spanning nodes $span times"
done
# --numa isolate runs on the starting node's CPUs: more threads than those is the warning (two
# pretend nodes split the CPUs, so -t of them all is more than one node's; one CPU is two -t 2)
n=$(( cpus > 1 ? cpus : 2 ))
expect 0 "--numa isolate, -t over the node" -- env DECODE_FAKE_NUMA=2 "$d" -m "$sched" -p a -n 1 --temp 0 -t $n --numa isolate
grep -q "warning: -t $n is more than the [0-9]* CPUs of the starting node (--numa isolate)" "$tmp/err" ||
  fail "--numa isolate, -t over the node: no warning: $(cat "$tmp/err")"
expect 0 "print-schedule -t 2 --tail-split on" -- "$d" -m "$sched" -p a -n 1 --temp 0 -t 2 --print-schedule --tail-split on
grep -q "^  down    whole tiles, then the last tile of 2 shares in" "$tmp/err" ||
  fail "print-schedule --tail-split on: $(cat "$tmp/err")"
expect 2 "bad --tail-split" -- "$d" -m "$sched" -p a --tail-split yes
expect 0 "print-schedule one thread" -- "$d" -m "$model" -p a -n 1 --temp 0 -t 2 --print-schedule
grep -q "^schedule: 1 threads" "$tmp/err" && grep -q "^stealing: off (one thread)$" "$tmp/err" ||
  fail "print-schedule stories260K: $(cat "$tmp/err")"
grep -q "differ in element size" "$tmp/err" && fail "print-schedule stories260K: its layers are alike: $(cat "$tmp/err")"
# A layer of another element size: the plan's sizes are layer 0's, and it says so.
"$bin/gguf-convert" "$sched" "$tmp/mixed.gguf" --type f32 --only blk.1. >/dev/null || fail "gguf-convert --only blk.1."
# --type twice: the last wins, as its help says
expect 0 "gguf-convert --type twice" -- "$bin/gguf-convert" "$model" "$tmp/twice.gguf" --type f16 --type bf16
"$bin/gguf-info" "$tmp/twice.gguf" | grep -q "blk.0.attn_q.weight .* BF16 " || fail "gguf-convert --type f16 --type bf16: not bf16"
rm -f "$tmp/twice.gguf"
expect 0 "print-schedule mixed" -- "$d" -m "$tmp/mixed.gguf" -p a -n 1 --temp 0 -t 2 --print-schedule
grep -q "^schedule: the sizes above are layer 0's; layer 1's weights (and maybe others') differ in element size" "$tmp/err" ||
  fail "print-schedule mixed: $(cat "$tmp/err")"

# gemv-bench -s: a model's shapes as cells (K x N, N not a multiple of the tile), checked against
# the reference inside; malformed lists are refused. 4096x32 is one narrow tile: the roofline pass
# must read it (in whole-tile units it read nothing, and the cell showed 0.4% of a roofline of
# thousands of GB/s). The roofline itself is checked (the bug read 5073 GB/s), and the kernel's
# share of it but on the scalar path (DECODE_ISA=scalar, or a CPU without AVX2), which reads 2-3%.
g=$bin/gemv-bench
expect 0 "gemv-bench shapes" -- "$g" -t 1 -d f16,bf16 -r 7 -s 72x100,16x64,4096x32
[ "$(grep -c '^72x100,' "$tmp/out")" = 2 ] && [ "$(grep -c '^16x64/null,' "$tmp/out")" = 2 ] || fail "gemv-bench -s rows: $(cat "$tmp/out")"
scalar=$(grep -c '^gemv-bench: isa scalar' "$tmp/err")
awk -F, -v scalar="$scalar" '$1 == "4096x32" { n++; if (!($8 > 0 && $8 < 1000 && (scalar || $9 > 5))) bad = 1 }
  END { exit bad || n != 2 }' "$tmp/out" || fail "gemv-bench narrow tile roofline: $(cat "$tmp/out")"
grep -q '^l2_512' "$tmp/out" && fail "gemv-bench -s without -c ran the default cells"
for bad in 3x x4 4x4, 4x4,,2x2 100000x3 0x5 4x4x4 40000x40000 " 4x4" +4x4; do
  expect 2 "gemv-bench -s $bad" -- "$g" -t 1 -s "$bad"
done
# a list option given twice adds up (as in llama-bench), in each bench: 2 shapes x 2 thread counts,
# 2 rows x 2 types, 2 sizes
expect 0 "gemv-bench lists twice" -- "$g" -s 64x64 -s 96x96 -t 1 -t 2 -d f32 -r 7
[ "$(grep -c -E '^(64x64|96x96),f32,[0-9]+,[0-9]+,[12],' "$tmp/out")" = 4 ] || fail "gemv-bench lists twice: $(cat "$tmp/out")"
expect 0 "gemm-bench lists twice" -- "$bin/gemm-bench" -m 1 -m 2 -k 64 -n 64 -r 3 -t 1 -d f32 -d f16
[ "$(grep -c -E '^gemm,' "$tmp/out")" = 4 ] || fail "gemm-bench lists twice: $(cat "$tmp/out")"
expect 0 "roofline lists twice" -- "$bin/roofline" -s 1M -s 2M -t 1 -r 1 -o csv
[ "$(grep -c -E '^(1048576|2097152),1,' "$tmp/out")" = 2 ] || fail "roofline lists twice: $(cat "$tmp/out")"
# the prefetch's hint overridden: said on the cell's line; anything but l1 or l2 refused
expect 0 "gemv-bench --hint l2" -- "$g" -t 1 -d f16 -r 7 -s 4096x288 --pf 2048 --hint l2
grep -q "4096x288 f16 t=1:.*overridden tuning: prefetch 2048 B into L2" "$tmp/err" || fail "--hint l2 not applied: $(grep 4096x288 "$tmp/err")"
expect 2 "gemv-bench --hint l3" -- "$g" -t 1 -s 16x64 --hint l3
# --segments: each tile's segments a few to a call, then folded (checked against the reference
# inside: a wrong fold fails the run); rows named CELL/segN; 0 and 65 refused
expect 0 "gemv-bench --segments 3" -- "$g" -t 1,2 -d f16,bf16 -r 7 -s 1300x100 --segments 3
[ "$(grep -c '^1300x100/seg3,' "$tmp/out")" = 4 ] || fail "gemv-bench --segments rows: $(cat "$tmp/out")"
grep -q "1300x100/seg3 bf16 t=2:" "$tmp/err" || fail "gemv-bench --segments stderr: $(cat "$tmp/err")"
for bad in 0 65 x; do expect 2 "gemv-bench --segments $bad" -- "$g" -t 1 -s 16x64 --segments "$bad"; done

# A table into a full disk is a failure in every bench, not a table printed (the last stderr line
# says so); sizes past half the memory are refused, not allocated and filled; roofline's labels
# are the sizes asked for.
for cmd in "roofline -t 1 -s 256K -r 1" "gemm-bench -m 1 -t 1 -d f32 -k 64 -n 64 -r 3" "l4-bench -r 1"; do
  set -- $cmd; tool=$1; shift
  cases=$((cases + 1))
  "$bin/$tool" "$@" >/dev/full 2>"$tmp/err"; st=$?
  [ "$st" = 1 ] && tail -1 "$tmp/err" | grep -q "^$tool: writing the .* to stdout failed$" ||
    fail "$tool, full stdout: exit $st: $(tail -1 "$tmp/err")"
done
mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
if [ "${mem_kb:-0}" -gt 0 ] && [ "$mem_kb" -lt 200000000 ]; then   # under ~190 GiB: both sizes are past half
  expect 2 "gemm-bench past half the memory" -- "$bin/gemm-bench" -m 4096 -k 65536 -n 262144 -d f32 -t 1 -r 3
  grep -q "needs .* GiB, more than half of this machine's" "$tmp/err" || fail "gemm-bench: $(cat "$tmp/err")"
  expect 2 "roofline past half the memory" -- "$bin/roofline" -t 1 -s 1024G
  grep -q "more than half of this machine's memory" "$tmp/err" || fail "roofline: $(cat "$tmp/err")"
else
  echo "skipped: the size refusals (this machine has $mem_kb kB)"; cases=$((cases + 2))
fi
expect 0 "roofline labels" -- "$bin/roofline" -t 1 -s 1536,3M -r 1
grep -q "^| 1536 B | 1 |" "$tmp/out" && grep -q "^| 3 MiB | 1 |" "$tmp/out" || fail "roofline labels: $(cat "$tmp/out")"
expect 0 "roofline -o csv -o md" -- "$bin/roofline" -t 1 -s 256K -r 1 -o csv -o md   # the last -o wins
grep -q "^| 256 KiB | 1 |" "$tmp/out" || fail "roofline -o csv -o md: not the table: $(cat "$tmp/out")"

# --help into a full disk or a pipe already closed is a failure named on stderr, not help printed
# or a death by SIGPIPE (exit 141), in every tool
for tool in decode decode-bench gemv-bench gemm-bench roofline gguf-info gguf-convert gguf-synth tokenize l4-bench; do
  expect 1 "$tool --help > /dev/full" -- sh -c '"$1" --help >/dev/full' sh "$bin/$tool"
  cases=$((cases + 1))
  rm -f "$tmp/go"; mkfifo "$tmp/go"     # the tool starts once the pipe's reader has closed it
  { read -r _ <"$tmp/go"; "$bin/$tool" --help 2>"$tmp/err"; echo $? >"$tmp/st"; } | { exec 0<&-; echo >"$tmp/go"; }
  [ "$(cat "$tmp/st")" = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$tool --help into a closed pipe: exit $(cat "$tmp/st"): $(cat "$tmp/err")"
done

# An empty item in a list option is refused, not skipped; the bench tools name a bad DECODE_ISA
# and a bad option on one line; tokenize --time into a full disk says so.
for l4 in "--l4 off,,stream" "--l4 ,off" "--tail-split on,off," "--split-k auto,,off"; do
  expect 2 "decode-bench $l4" -- "$bin/decode-bench" -m "$model" $l4
done
expect 2 "decode-bench -m with an empty item" -- "$bin/decode-bench" -m "$model,,$model"
# a model path of 1,250 bytes and more is printed whole (it was cut at 1,022)
long=$tmp; for _ in 1 2 3 4 5; do long=$long/$(printf 'a%.0s' $(seq 250)); done
mkdir -p "$long" && ln -s "$model" "$long/m.gguf"
expect 0 "decode-bench, a long model path" -- "$bin/decode-bench" -m "$long/m.gguf" -t 1 -p 0 -n 1 -r 1 --roofline-mib 0 -o csv
grep -q "^$long/m.gguf," "$tmp/out" || fail "decode-bench cut a long model path: $(tail -1 "$tmp/out" | cut -c1-80)..."
expect 2 "gemv-bench -c with an empty item" -- "$g" -t 1 -c l2_512,
expect 2 "roofline DECODE_ISA typo" -- env DECODE_ISA=foo "$bin/roofline" -t 1 -s 256K -r 1
# a variable a tool does not read is not its to refuse: the kernel benchmarks run under a runtime typo
for v in DECODE_PLAN=foo DECODE_WAIT_PREFETCH=1k DECODE_FAKE_NUMA=x; do
  expect 0 "roofline under $v" -- env $v "$bin/roofline" -t 1 -s 256K -r 1
  expect 0 "gemv-bench under $v" -- env $v "$g" -t 1 -s 64x64 -d f16 -r 7
done
expect 0 "roofline under DECODE_TUNE=x (not read)" -- env DECODE_TUNE=x "$bin/roofline" -t 1 -s 256K -r 1
# DECODE_FAKE_NUMA takes digits only, as the other numeric variables do
for v in " 2" +2 2x 0 1025; do
  expect 2 "DECODE_FAKE_NUMA='$v'" -- env DECODE_FAKE_NUMA="$v" "$d" -m "$model" -p a -n 1
  grep -q "DECODE_FAKE_NUMA must be a node count in 1..1024" "$tmp/err" || fail "DECODE_FAKE_NUMA='$v': $(cat "$tmp/err")"
done
expect 2 "l4-bench unknown option" -- "$bin/l4-bench" --bogus
expect 1 "tokenize --time into a full disk" -- sh -c '"$1" -m "$2" -p hi --time 3 >/dev/full' sh "$bin/tokenize" "$model"
# gguf-synth's seed is decimal, as its help says: 010 is ten
expect 0 "gguf-synth --seed 010" -- "$bin/gguf-synth" "$tmp/s010.gguf" --n-embd 32 --n-layer 1 --n-head 2 --n-kv-head 2 --n-ff 64 --n-vocab 300 --seed 010
expect 0 "gguf-synth --seed 10" -- "$bin/gguf-synth" "$tmp/s10.gguf" --n-embd 32 --n-layer 1 --n-head 2 --n-kv-head 2 --n-ff 64 --n-vocab 300 --seed 10
cmp -s "$tmp/s010.gguf" "$tmp/s10.gguf" || fail "gguf-synth --seed 010 is not --seed 10"
# a dangling link whose target's name is longer than a path may be: where it leads cannot be
# checked (the cache directory), nor removed by its cut name (another file), so it is refused
ln -s "$(printf 'a/%.0s' $(seq 2040))t" "$tmp/longlink"
expect 1 "a dump through a link to a long name" -- "$d" -m "$model" -p hi -n 1 --dump-logits "$tmp/longlink"
grep -q "its chain of symbolic links leads to a name too long to check; not writing it" "$tmp/err" ||
  fail "a dump through a link to a long name: $(cat "$tmp/err")"
# decode-bench stopped by a signal leaves no --plot file it created (an empty SVG looked like a
# finished one)
cases=$((cases + 1))
got=$(sigint "$tmp/err" "loading for" -- "$bin/decode-bench" -m "$model" -t 1 -p 0 -n 500 -r 128 --roofline-mib 0 --plot "$tmp/stopped.svg")
[ "$got" = "0 130" ] && [ ! -e "$tmp/stopped.svg" ] || fail "decode-bench stopped: '$got', plot left: $(ls "$tmp/stopped.svg" 2>&1): $(cat "$tmp/err")"
cases=$((cases + 1))           # the same through a dangling link: the link stays, not its new target
ln -sfn target.svg "$tmp/dangling.svg"
got=$(sigint "$tmp/err" "loading for" -- "$bin/decode-bench" -m "$model" -t 1 -p 0 -n 500 -r 128 --roofline-mib 0 --plot "$tmp/dangling.svg")
[ "$got" = "0 130" ] && [ -L "$tmp/dangling.svg" ] && [ ! -e "$tmp/target.svg" ] ||
  fail "decode-bench stopped, plot through a dangling link: '$got': $(ls -l "$tmp/dangling.svg" "$tmp/target.svg" 2>&1)"
# A tool stopped by SIGINT exits with status 130, never by the signal (the interface: a shell
# shows 130 either way, a program that waits for it can tell); decode first finishes its token and
# prints its timings.
for cmd in "roofline -t 1 -s 64M -r 1000" "l4-bench -r 100000" "decode -m $model -p Once -n 100000 --ignore-eos --temp 0 -c 100000"; do
  cases=$((cases + 1))
  got=$(sigint "$tmp/err" "" -- "$bin/"$cmd)
  [ "$got" = "0 130" ] || fail "${cmd%% *} after SIGINT: signal and status '$got', want '0 130': $(head -c 300 "$tmp/err")"
done

# A model whose logits are all NaN (output_norm.weight overwritten with NaNs): decode stops at the
# first generated token with exit 1 and says why, greedy or sampled, with or without --ignore-eos
# (whose masked end-of-generation tokens, -inf, must not win over the NaNs).
nan=$tmp/nan.gguf
cp "$model" "$nan" && chmod u+w "$nan"   # the shared copy is read-only, and so its copy
info=$("$bin/gguf-info" "$model")
data=$(echo "$info" | sed -n 's/^data offset: //p')
off=$(echo "$info" | awk '$2 == "output_norm.weight" {print $5; exit}')
bytes=$(echo "$info" | awk '$2 == "output_norm.weight" {print $6; exit}')
for ((i = 0; i < bytes / 4; i++)); do printf '\x00\x00\xc0\x7f'; done |
  dd of="$nan" bs=1 seek=$((data + off)) conv=notrunc status=none || fail "could not write NaNs"
for flags in "--temp 0" "--temp 0 --ignore-eos" "-s 1" "-s 1 --ignore-eos"; do
  cases=$((cases + 1))
  "$d" -m "$nan" -p Once -n 4 --pack-cache off $flags >"$tmp/out" 2>"$tmp/err"; st=$?
  [ "$st" = 1 ] && [ "$(cat "$tmp/out")" = Once ] && grep -q "the logits after position 1 are all NaN or -inf" "$tmp/err" ||
    fail "all-NaN logits ($flags): exit $st, stdout '$(head -c 100 "$tmp/out")', stderr $(tail -n 2 "$tmp/err")"
  case $flags in *ignore-eos*) grep -q "masked by --ignore-eos" "$tmp/err" || fail "NaN logits ($flags): mask not said";; esac
done

[ "$cases" = 192 ] || fail "ran $cases cases, expected 192"
echo "decode cli: $cases cases, $fails failures"
[ "$fails" = 0 ]
