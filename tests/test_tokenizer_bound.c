// tokenizer_max_token_bytes is a true bound: no text of len bytes tokenizes to fewer than
// ceil(len / bound) tokens (BOS aside). Swept over llama.cpp's llama-spm vocab and stories260K
// with texts built to need few tokens: every longest piece repeated, runs of spaces, random
// bytes. (decode refuses an over-long prompt on this bound before tokenizing it: test_cli.sh.)
// Unless tokenizer_drops_bytes, which says when it is not a bound (checked on falcon's vocab).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tests/check.h"

static int n_checked;

static void check_text(const tokenizer *t, const char *text, size_t len, const char *what) {
    int32_t *ids; size_t n;
    CHECK(tokenizer_encode(t, text, len, 0, 0, &ids, &n) == 0);
    size_t bound = tokenizer_max_token_bytes(t);
    CHECKF(n * bound >= len, "%s: %zu bytes in %zu tokens, but no token is to cover more than %zu", what, len, n,
           bound);
    free(ids);
    n_checked++;
}

// The tokenizer of the file at path (it keeps what it needs: the file is closed again).
static tokenizer *load(const char *path) {
    char err[GGUF_ERR_MAX];
    gguf_file g;
    tokenizer *t;
    CHECKF(gguf_open(&g, path, err) == 0 && tokenizer_load(&t, &g, err) == 0, "%s", err);
    gguf_close(&g);
    return t;
}

static void sweep(const char *path) {
    tokenizer *t = load(path);
    size_t bound = tokenizer_max_token_bytes(t), cap = 64 * (bound + 8);
    char *text = malloc(cap), piece[1024];
    CHECK(text && bound >= 1);
    int before = n_checked;
    for (int32_t id = 0; id < tokenizer_n_vocab(t); id++) {   // each of the longest pieces, repeated
        size_t k = tokenizer_piece(t, id, piece, sizeof piece);
        if (k == 0 || k > sizeof piece || k * 3 < bound) continue;
        size_t len = 0;
        while (len + k <= cap) { memcpy(text + len, piece, k); len += k; }
        check_text(t, text, len, "repeated long piece");
    }
    CHECK(n_checked > before);
    for (size_t run = 1; run <= cap && run <= 512; run++) {   // runs of spaces: one U+2581 per byte
        memset(text, ' ', run);
        check_text(t, text, run, "spaces");
    }
    uint64_t x = 1;
    for (int k = 0; k < 200; k++) {                              // random bytes, any UTF-8 or none
        size_t len = 1 + k % 97;
        for (size_t i = 0; i < len; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            text[i] = (char)(x >> 56);
        }
        check_text(t, text, len, "random bytes");
    }
    free(text);
    tokenizer_free(t);
}

// tokenizer_drops_bytes: falcon's vocab has no token for some control bytes' characters, so a run
// of them vanishes and the bound fails, as the flag says; gpt-neox's lacks only the characters of
// bytes UTF-8 never holds (C0, C1, F5..FF), which no word reaches.
static void drops(const char *path, int want) {
    tokenizer *t = load(path);
    CHECKF(tokenizer_drops_bytes(t) == want, "%s: drops_bytes %d", path, !want);
    if (want) {
        char text[1024];
        memset(text, 0x03, sizeof text - 1);
        text[sizeof text - 1] = 'a';
        int32_t *ids; size_t n;
        CHECK(tokenizer_encode(t, text, sizeof text, 0, 0, &ids, &n) == 0);
        CHECKF(n * tokenizer_max_token_bytes(t) < sizeof text, "%zu tokens", n);
        free(ids);
    }
    tokenizer_free(t);
}

int main(void) {
    drops(SHARED_DIR "/testdata/vocab/ggml-vocab-falcon.gguf", 1);
    drops(SHARED_DIR "/testdata/vocab/ggml-vocab-gpt-neox.gguf", 0);
    drops(SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf", 0);
    sweep(SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf");
    int spm = n_checked;
    sweep(SHARED_DIR "/testdata/models/stories260K.gguf");
    CHECKF(spm >= 700 && n_checked - spm >= 700, "%d and %d texts", spm, n_checked - spm);
    printf("test_tokenizer_bound: %d texts (%d llama-spm, %d stories260K) within the bound\n", n_checked, spm,
           n_checked - spm);
    return 0;
}
