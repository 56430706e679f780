// The fuzz target of tests/fuzz_model.c run deterministically where every build runs it (ASan and
// UBSan in CI): each byte of the metadata of five gguf-synth models (SentencePiece and byte-level
// BPE vocabularies; llama, qwen2 and qwen3; tied output, Llama 3 RoPE factors, f16 and bf16)
// replaced by five values in turn (a newline among them: names and texts reach error messages).
// Each mutant must be refused in one line by whatever refuses it (reader, tokenizer, binding) or
// hold every claim the target checks; the counts show each level both accepting and refusing, so
// the sweep cannot silently stop reaching the tokenizer or the binding.
#include <stdio.h>
#include "tests/check.h"
#include "tests/tool_util.h"

static const char *seed_name;   // the case, for a failed claim
static size_t at;
static int value = -1;          // -1: the seed as written
#define REQUIRE(c) do { if (!(c)) { \
    if (value < 0) fprintf(stderr, "%s as written: %s\n", seed_name, #c); \
    else fprintf(stderr, "%s, byte %zu set to 0x%02x: %s\n", seed_name, at, value, #c); \
    exit(1); } } while (0)
#include "tests/fuzz_model.c"

static const struct { const char *name, *spec; } seeds[] = {
    {"spm.gguf", ""},
    {"bpe.gguf", "--vocab bpe --pre llama-bpe --rope-scaling llama3 --dtype f16"},
    {"qwen2.gguf", "--arch qwen2 --vocab bpe --pre qwen2 --dtype bf16"},
    {"qwen3.gguf", "--arch qwen3 --n-kv-head 1 --head-dim 8 --tie"},
    {"deepseek.gguf", "--vocab bpe --pre deepseek-llm --rope-scaling linear --bias"},
};
#define SHAPE "--n-embd 8 --n-layer 1 --n-head 2 --n-ff 8 --n-vocab 260 --ctx 16 "

#define N_SEEDS (sizeof seeds / sizeof *seeds)

int main(void) {
    uint8_t *buf[N_SEEDS];
    size_t len[N_SEEDS];
    char *dir = scratch_dir();   // the seeds are read, then their directory goes before the sweep
    CHECK(dir);
    for (size_t s = 0; s < N_SEEDS; s++) {
        char spec[256];
        snprintf(spec, sizeof spec, SHAPE "%s", seeds[s].spec);
        char *path = synth_model(dir, seeds[s].name, spec);
        buf[s] = (uint8_t *)must_read(path, &len[s]);
        free(path);
    }
    CHECK(scratch_remove(dir) == 0);
    long cases = 0, opened = 0, tokenizers = 0, models = 0;
    for (size_t s = 0; s < N_SEEDS; s++) {
        gguf_file g;
        char err[GGUF_ERR_MAX];
        CHECKF(gguf_open_mem(&g, buf[s], len[s], "fuzz", err) == 0, "%s", err);
        size_t meta = g.data_offset;
        gguf_close(&g);
        seed_name = seeds[s].name, value = -1;
        fuzz_model_seen.tokenizers = fuzz_model_seen.models = 0;
        LLVMFuzzerTestOneInput(buf[s], len[s]);   // the seed itself passes every level
        CHECKF(fuzz_model_seen.tokenizers == 1 && fuzz_model_seen.models == 1, "%s refused", seed_name);
        CHECKF(meta > 2000 && meta < len[s], "%s: metadata of %zu bytes", seed_name, meta);
        fuzz_model_seen.opened = fuzz_model_seen.tokenizers = fuzz_model_seen.models = 0;
        for (at = 0; at < meta; at++) {
            const uint8_t orig = buf[s][at], subs[5] = {orig ^ 0x01, orig ^ 0x80, 0x00, 0xff, '\n'};
            for (int k = 0; k < 5; k++) {
                if ((value = subs[k]) == orig) continue;
                buf[s][at] = (uint8_t)value;
                LLVMFuzzerTestOneInput(buf[s], len[s]);
                cases++;
            }
            buf[s][at] = orig;
        }
        printf("%s: %zu metadata bytes; mutants opened %ld, tokenizers %ld, models %ld\n", seed_name, meta,
               fuzz_model_seen.opened, fuzz_model_seen.tokenizers, fuzz_model_seen.models);
        opened += fuzz_model_seen.opened, tokenizers += fuzz_model_seen.tokenizers;
        models += fuzz_model_seen.models;
        free(buf[s]);
    }
    // The sweep's size, and every level both accepting some mutants and refusing others.
    CHECKF(cases > (long)N_SEEDS * 4 * 2000, "%ld cases", cases);
    CHECK(opened > 0 && opened < cases && tokenizers > 0 && tokenizers < opened && models > 0 && models < opened);
    printf("%ld mutants: %ld opened, %ld tokenizers, %ld models\n", cases, opened, tokenizers, models);
    return 0;
}
