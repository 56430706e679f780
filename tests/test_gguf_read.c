// The reader on real files: stories260K (values from ../shared/testdata/README.md) and every
// vocab-only GGUF, through gguf_open and gguf_open_mem.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "model/gguf.h"
#include "tests/check.h"

#define MODEL SHARED_DIR "/testdata/models/stories260K.gguf"

static int64_t get_int(const gguf_file *g, const char *key) {
    char err[GGUF_ERR_MAX];
    int64_t v = -1;
    CHECKF(gguf_get_int(g, key, 0, INT64_MAX, &v, err) == 0, "%s", key);
    return v;
}

static void check_str(const char *s, uint64_t len, const char *want) {
    CHECKF(len == strlen(want) && !memcmp(s, want, len), "got '%.*s', want '%s'", (int)len, s, want);
}

static void check_tensor(const gguf_file *g, const char *name, uint64_t ne0, uint64_t ne1, uint64_t off) {
    const gguf_tensor *t = gguf_find_tensor(g, name);
    CHECKF(t, "%s missing", name);
    CHECK(t->type == GGML_TYPE_F32);
    CHECK(t->n_dims == (ne1 > 1 ? 2u : 1u) && t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1);
    CHECKF(t->offset == off, "%s offset %llu", name, (unsigned long long)t->offset);
    CHECK(t->nbytes == ne0 * ne1 * 4);
    CHECK((const uint8_t *)t->data == g->map + g->data_offset + off);
}

static void check_stories(const gguf_file *g) {
    char err[GGUF_ERR_MAX];
    const char *s; uint64_t len; float f; int64_t v;
    CHECK(g->version == 3 && g->n_kv == 19 && g->n_tensors == 48);
    CHECK(g->alignment == 32 && g->data_offset == 14176 && g->size == 1185376);
    CHECK(gguf_get_str(g, "general.architecture", &s, &len, err) == 0);
    check_str(s, len, "llama");
    CHECK(get_int(g, "llama.embedding_length") == 64 && get_int(g, "llama.block_count") == 5);
    CHECK(get_int(g, "llama.attention.head_count") == 8 && get_int(g, "llama.attention.head_count_kv") == 4);
    CHECK(get_int(g, "llama.feed_forward_length") == 172 && get_int(g, "llama.context_length") == 2048);
    CHECK(gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f, err) == 0 && f == 1e-5f);
    // seperator_token_id is UINT32 0xFFFFFFFF: in range for u32, out of range for i32.
    CHECK(gguf_get_int(g, "tokenizer.ggml.seperator_token_id", 0, UINT32_MAX, &v, err) == 0 && v == UINT32_MAX);
    err[0] = 0;
    CHECK(gguf_get_int(g, "tokenizer.ggml.seperator_token_id", 0, INT32_MAX, &v, err) == -1 &&
          strstr(err, "out of range"));
    CHECK(gguf_get_int(g, "llama.rope.freq_base", 0, 1, &v, err) == 1);   // absent
    CHECK(gguf_get_f32(g, "general.architecture", &f, err) == -1 && strstr(err, "general.architecture"));

    const gguf_kv *tok, *scores, *types;
    CHECK(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok, err) == 0 && tok->n == 512);
    CHECK(gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores, err) == 0 && scores->n == 512);
    CHECK(gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, err) == 0 && types->n == 512);
    CHECK(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, &types, err) == -1 && strstr(err, "STRING"));
    gguf_arr_str(tok, 0, &s, &len); check_str(s, len, "<unk>");
    gguf_arr_str(tok, 1, &s, &len); check_str(s, len, "<s>");
    gguf_arr_str(tok, 3, &s, &len); check_str(s, len, "<0x00>");
    gguf_arr_str(tok, 511, &s, &len); check_str(s, len, "\xe2\x80\x8a");   // U+200A
    float sc; int32_t ty;
    memcpy(&sc, scores->data + 511 * 4, 4); CHECK(sc == -252.0f);
    memcpy(&ty, types->data + 0 * 4, 4); CHECK(ty == 2);
    memcpy(&ty, types->data + 3 * 4, 4); CHECK(ty == 6);

    check_tensor(g, "token_embd.weight", 64, 512, 0);
    check_tensor(g, "output_norm.weight", 64, 1, 131072);
    check_tensor(g, "output.weight", 64, 512, 131328);
    check_tensor(g, "blk.0.attn_k.weight", 64, 32, 278784);
    check_tensor(g, "blk.0.ffn_down.weight", 172, 64, 355840);
    check_tensor(g, "blk.4.ffn_norm.weight", 64, 1, 1170944);
    CHECK(!gguf_find_tensor(g, "blk.5.ffn_norm.weight"));
    const gguf_tensor *last = &g->tensors[47];
    CHECK(g->data_offset + last->offset + last->nbytes == g->size);   // the last tensor ends at EOF
    CHECK(!memcmp(gguf_find_tensor(g, "output.weight")->data, gguf_find_tensor(g, "token_embd.weight")->data, 131072));
}

int main(void) {
    gguf_file g;
    char err[GGUF_ERR_MAX];
    CHECKF(gguf_open(&g, MODEL, err) == 0, "%s", err);
    CHECK(g.mapped == 1);
    check_stories(&g);

    // The same bytes through gguf_open_mem.
    uint8_t *buf = malloc(g.size);
    CHECK(buf);
    memcpy(buf, g.map, g.size);
    size_t size = g.size;
    gguf_close(&g);
    CHECKF(gguf_open_mem(&g, buf, size, "mem", err) == 0, "%s", err);
    CHECK(g.mapped == 0);
    check_stories(&g);
    gguf_close(&g);
    free(buf);

    static const struct { const char *name, *arch; uint64_t n_vocab; } vocabs[] = {
        {"baichuan", "baichuan", 64000}, {"bert-bge", "bert", 30522}, {"deepseek-llm", "llama", 102400},
        {"falcon", "falcon", 65024}, {"gpt-neox", "gptneox", 50432}, {"llama-spm", "llama", 32000},
        {"mpt", "mpt", 50432}, {"refact", "refact", 49216}, {"starcoder", "starcoder2", 49152},
    };
    int n_checked = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs; i++) {
        char path[512];
        const gguf_kv *tok;
        const char *s; uint64_t len;
        snprintf(path, sizeof path, SHARED_DIR "/testdata/vocab/ggml-vocab-%s.gguf", vocabs[i].name);
        CHECKF(gguf_open(&g, path, err) == 0, "%s", err);
        CHECK(g.n_tensors == 0 && g.data_offset == g.size);
        CHECK(gguf_get_str(&g, "general.architecture", &s, &len, err) == 0);
        check_str(s, len, vocabs[i].arch);
        CHECKF(gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok, err) == 0, "%s", err);
        CHECKF(tok->n == vocabs[i].n_vocab, "%s: %llu tokens", vocabs[i].name, (unsigned long long)tok->n);
        for (uint64_t t = 0; t < tok->n; t++) {   // every string lies inside the file
            gguf_arr_str(tok, t, &s, &len);
            CHECK((const uint8_t *)s + len <= g.map + g.size);
        }
        gguf_close(&g);
        n_checked++;
    }
    CHECK(n_checked == 9);

    // Files that are not GGUF at all.
    CHECK(gguf_open(&g, SHARED_DIR "/testdata/vocab", err) == -1 && strstr(err, "directory"));
    CHECK(gguf_open(&g, SHARED_DIR "/testdata/no-such-file.gguf", err) == -1 && strstr(err, "no-such-file"));
    CHECK(gguf_open(&g, SHARED_DIR "/testdata/README.md", err) == -1 && strstr(err, "not a GGUF file"));
    printf("test_gguf_read: stories260K + %d vocab files ok\n", n_checked);
    return 0;
}
