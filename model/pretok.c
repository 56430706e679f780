// Each split kind cuts one piece [b, e) of the code points into words. Three are llama.cpp's
// hand-written matchers (GPT-2, Llama 3 / Qwen2); the others stand for one std::regex each,
// matched the way llama.cpp runs them: leftmost match, search resumed after it, and the text
// between matches kept as words too. llama.cpp feeds those regexes a view of the text: with a
// \p{..} class, every non-ASCII code point becomes a byte for its class (so only letters,
// numbers, punctuation, symbols and marks are told apart); without one, the code points as
// they are; in both, non-ASCII white space becomes '\v'. \s is ASCII white space.
#include "model/pretok.h"

#include <string.h>

#include "model/unicode.h"

enum {
    END,
    GPT2,          // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
    // LLAMA3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+
    //         |\s+(?!\S)|\s+ (the line breaks before a '|')
    LLAMA3,
    QWEN2,         // the same with \p{N} for \p{N}{1,3}
    PUNCT_RUN,     // [\p{P}\$\+<=>\^~\|]+
    PUNCT_RUN_BT,  // [\p{P}\$\+<=>\^~\|`]+
    NUM_RUN,       // \p{N}+
    NUM_ONE,       // \p{N}
    DIGITS3,       // [0-9][0-9][0-9]
    CR_LF,         // [\r\n]
    DS_LETTERS,    // \s?[A-Za-zµÀ-Ö...]+  (DeepSeek's list of Latin, Greek, Cyrillic... letters)
    DS_PUNCT,      // \s?[!-/:-~！-／：-～‘-‟　-。]+
    SPACE_END,     // \s+$
    CJK_RUN,       // [一-龥ࠀ-一가-퟿]+
    SP_LETTERS,    // \s?\p{L}+
    SP_PUNCT,      // \s?\p{P}+
};

const char *const pretok_names[] = {
    "default", "gpt-2", "llama-bpe", "llama3", "llama-v3", "qwen2", "deepseek-llm",
    "deepseek-coder", "falcon", "mpt", "starcoder", "refact", "smollm", "olmo", "command-r", NULL};

static const pretok table[] = {
    {"default", {PUNCT_RUN, GPT2, NUM_RUN, DIGITS3}, 0, 0},
    {"gpt-2", {GPT2}, 0, 0},
    {"mpt", {GPT2}, 0, 0},
    {"olmo", {GPT2}, 0, 0},
    {"llama-bpe", {LLAMA3}, 1, 1},
    {"llama3", {LLAMA3}, 1, 1},
    {"llama-v3", {LLAMA3}, 1, 1},
    {"qwen2", {QWEN2}, 0, 0},
    {"deepseek-llm", {CR_LF, DS_LETTERS, DS_PUNCT, SPACE_END, CJK_RUN, NUM_RUN}, 0, 0},
    {"deepseek-coder", {CR_LF, SP_LETTERS, SP_PUNCT, CJK_RUN, NUM_ONE}, 0, 0},
    {"falcon", {PUNCT_RUN_BT, GPT2, DIGITS3}, 0, 0},
    {"starcoder", {NUM_ONE, GPT2}, 0, 0},
    {"refact", {NUM_ONE, GPT2}, 0, 0},
    {"command-r", {NUM_ONE, GPT2}, 0, 0},
    {"smollm", {NUM_ONE, GPT2}, 0, 0},
};

const pretok *pretok_find(const char *name, size_t len) {
    if (!name || !len) return &table[0];   // llama.cpp reads a missing key as "": the same default
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strlen(table[i].name) == len && !memcmp(table[i].name, name, len)) return &table[i];
    return NULL;
}

// ---- llama.cpp's hand-written matchers ----

// A piece being cut: code points and classes of [b, e), words appended to out.
typedef struct {
    const uint32_t *cp;
    const uint8_t *cls;
    size_t b, e, last;          // last: where the previous word ended
    uint32_t *out;
    size_t n_out;
} cut;

// Class at i, 0 past the piece (llama.cpp's empty flags, which no test matches).
static int cls_at(const cut *c, size_t i) { return i < c->e ? c->cls[i] : 0; }
static uint32_t cp_at(const cut *c, size_t i) { return i < c->e ? c->cp[i] : 0xffffffffu; }
static int kind(int cl) { return cl & UC_KIND; }
static int is_letter(int cl) { return kind(cl) == UC_LETTER; }
static int is_number(int cl) { return kind(cl) == UC_NUMBER; }
static int is_space(int cl) { return (cl & UC_SPACE) != 0; }
// [^\s\p{L}\p{N}] inside the piece (llama.cpp: "!(ws | letter | number) && flags").
static int is_other(int cl, size_t i, const cut *c) {
    return i < c->e && !is_space(cl) && !is_letter(cl) && !is_number(cl);
}

// Ends a word at end (nothing if empty); returns its length.
static size_t word(cut *c, size_t end) {
    size_t n = end - c->last;
    if (n) c->out[c->n_out++] = (uint32_t)n;
    c->last = end;
    return n;
}

static uint32_t lower_ascii(uint32_t x) { return x >= 'A' && x <= 'Z' ? x + 32 : x; }

// 's 't 're 've 'm 'll 'd at i (any case when fold): the length matched, else 0.
static size_t contraction(const cut *c, size_t i, int fold) {
    if (c->cp[i] != '\'' || i + 1 >= c->e) return 0;
    uint32_t x = c->cp[i + 1], y;
    if (fold) x = lower_ascii(x);
    if (x == 's' || x == 't' || x == 'm' || x == 'd') return 2;
    if (i + 2 >= c->e) return 0;
    y = fold ? lower_ascii(c->cp[i + 2]) : c->cp[i + 2];
    return (x == 'r' && y == 'e') || (x == 'v' && y == 'e') || (x == 'l' && y == 'l') ? 3 : 0;
}

// White space from i: its length, and (for Llama 3) the end of its last \r or \n, else 0.
static size_t space_run(const cut *c, size_t i, size_t *last_nl) {
    size_t k = 0;
    *last_nl = 0;
    while (is_space(cls_at(c, i + k))) {
        if (c->cp[i + k] == '\r' || c->cp[i + k] == '\n') *last_nl = i + k + 1;
        k++;
    }
    return k;
}

// The rest of a white space run: \s+(?!\S) leaves the last space to the word after it.
static size_t space_word(cut *c, size_t i, size_t k) {
    if (k > 1 && i + k < c->e) return word(c, i + k - 1);
    return word(c, i + (k ? k : 1));
}

static void split_gpt2(cut *c) {
    for (size_t i = c->b; i < c->e; i = c->last) {
        size_t k = contraction(c, i, 0);
        if (k) { word(c, i + k); continue; }
        int sp = c->cp[i] == ' ', cl = cls_at(c, i + sp);
        if (is_letter(cl) || is_number(cl) || is_other(cl, i + sp, c)) {
            size_t j = i + sp;
            if (is_letter(cl)) while (is_letter(cls_at(c, j))) j++;
            else if (is_number(cl)) while (is_number(cls_at(c, j))) j++;
            else while (is_other(cls_at(c, j), j, c)) j++;
            word(c, j);
            continue;
        }
        size_t nl;
        space_word(c, i, space_run(c, i, &nl));
    }
}

static void split_llama3(cut *c, size_t max_digits) {
    for (size_t i = c->b; i < c->e; i = c->last) {
        size_t k = contraction(c, i, 1);
        if (k) { word(c, i + k); continue; }
        uint32_t x = c->cp[i];
        int cl = c->cls[i];
        if (x != '\r' && x != '\n' && !is_number(cl) && (is_letter(cl) || is_letter(cls_at(c, i + 1)))) {
            size_t j = i + 1;                       // [^\r\n\p{L}\p{N}]?\p{L}+
            while (is_letter(cls_at(c, j))) j++;
            word(c, j);
            continue;
        }
        if (is_number(cl)) {                        // \p{N}{1,max_digits}
            size_t j = i;
            while (j - i < max_digits && is_number(cls_at(c, j))) j++;
            word(c, j);
            continue;
        }
        int sp = x == ' ';
        if (is_other(cls_at(c, i + sp), i + sp, c) || (sp && i + 1 == c->e)) {
            size_t j = i + sp;                      //  ?[^\s\p{L}\p{N}]+[\r\n]*
            while (is_other(cls_at(c, j), j, c)) j++;
            while (cp_at(c, j) == '\r' || cp_at(c, j) == '\n') j++;
            word(c, j);
            continue;
        }
        size_t nl, n = space_run(c, i, &nl);
        if (nl) word(c, nl);                        // \s*[\r\n]+
        else space_word(c, i, n);
    }
}

// ---- std::regex splits over llama.cpp's views ----

// The byte llama.cpp's "collapsed" view holds for a non-ASCII code point of class cl.
enum { V_OTHER = 0xd0, V_NUMBER, V_LETTER, V_PUNCT, V_MARK, V_SYMBOL };

static uint32_t view(const cut *c, size_t i, int collapsed) {
    uint32_t x = c->cp[i];
    int cl = c->cls[i];
    if (x < 0x80) return x;
    if (is_space(cl)) return '\v';
    if (!collapsed) return x;
    switch (kind(cl)) {
    case UC_NUMBER: return V_NUMBER;
    case UC_LETTER: return V_LETTER;
    case UC_PUNCT: return V_PUNCT;
    case UC_MARK: return V_MARK;
    case UC_SYMBOL: return V_SYMBOL;
    default: return V_OTHER;
    }
}

// x in one of the n ranges r, sorted and disjoint.
static int in(uint32_t x, const uint32_t (*r)[2], size_t n) {
    size_t lo = 0, hi = n;                  // the first range ending at or after x
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid][1] < x) lo = mid + 1; else hi = mid;
    }
    return lo < n && x >= r[lo][0];
}
#define IN(x, r) in(x, r, sizeof r / sizeof *r)

static int re_space(uint32_t x) { return x == ' ' || (x >= '\t' && x <= '\r'); }
static int re_digit(uint32_t x) { return x >= '0' && x <= '9'; }
static int re_alpha(uint32_t x) { return (x >= 'A' && x <= 'Z') || (x >= 'a' && x <= 'z'); }
// \p{P} in the collapsed view: the class byte and ASCII !"#%&'()*,-./:;?@[\]_{}
static int re_punct(uint32_t x) {
    return x == V_PUNCT ||
           (x < 0x80 && x > ' ' && !re_digit(x) && !re_alpha(x) && !strchr("$+<=>^`|~", (int)x) && x != 0x7f);
}

static const uint32_t ds_letters[][2] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A},
    {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57},
    {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124},
    {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139},
    {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B},
    {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06},
    {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943}};
static const uint32_t ds_punct[][2] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}};
static const uint32_t cjk[][2] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};   // 一-龥, ࠀ-一, 가-퟿ joined

// One class of a regex, on the view value x.
static int in_class(int k, uint32_t x) {
    switch (k) {
    case PUNCT_RUN: return re_punct(x) || (x < 0x80 && strchr("$+<=>^~|", (int)x) && x);
    case PUNCT_RUN_BT: return re_punct(x) || (x < 0x80 && strchr("$+<=>^~|`", (int)x) && x);
    case NUM_RUN: case NUM_ONE: return x == V_NUMBER || re_digit(x);
    case DIGITS3: return re_digit(x);
    case CR_LF: return x == '\r' || x == '\n';
    case DS_LETTERS: return IN(x, ds_letters);
    case DS_PUNCT: return IN(x, ds_punct);
    case CJK_RUN: return IN(x, cjk);
    case SP_LETTERS: return x == V_LETTER || re_alpha(x);
    case SP_PUNCT: return re_punct(x);
    default: return 0;
    }
}

// Length of the match of regex k at i (0: none).
static size_t match(const cut *c, int k, size_t i) {
    int collapsed = k == PUNCT_RUN || k == PUNCT_RUN_BT || k == NUM_RUN || k == NUM_ONE ||
                    k == SP_LETTERS || k == SP_PUNCT;
    size_t j = i;
    switch (k) {
    case NUM_ONE: case CR_LF:
        return in_class(k, view(c, i, collapsed));
    case DIGITS3:
        while (j < c->e && j - i < 3 && in_class(k, view(c, j, 0))) j++;
        return j - i == 3 ? 3 : 0;
    case DS_LETTERS: case DS_PUNCT: case SP_LETTERS: case SP_PUNCT:
        if (j + 1 < c->e && re_space(view(c, j, collapsed)) && in_class(k, view(c, j + 1, collapsed))) j++;
        /* fall through */
    default:
        while (j < c->e && in_class(k, view(c, j, collapsed))) j++;
        return j - i;
    }
}

static void split_regex(cut *c, int k) {
    if (k == SPACE_END) {           // \s+$ matches the white space that ends the piece, if any
        size_t j = c->e;
        while (j > c->b && re_space(view(c, j - 1, 0))) j--;
        word(c, j);
        word(c, c->e);
        return;
    }
    for (size_t i = c->b; i < c->e;) {
        size_t m = match(c, k, i);
        if (!m) { i++; continue; }
        word(c, i);                 // the text before the match
        word(c, i + m);
        i += m;
    }
    word(c, c->e);
}

size_t pretok_split(const pretok *p, const uint32_t *cp, const uint8_t *cls, size_t n,
                    uint32_t *len, uint32_t *tmp) {
    if (n == 0) return 0;
    size_t n_len = 1;
    len[0] = (uint32_t)n;
    for (int s = 0; s < 6 && p->steps[s] != END; s++) {
        cut c = {cp, cls, 0, 0, 0, tmp, 0};
        for (size_t w = 0; w < n_len; w++) {
            c.e = c.b + len[w];
            c.last = c.b;
            switch (p->steps[s]) {
            case GPT2: split_gpt2(&c); break;
            case LLAMA3: split_llama3(&c, 3); break;
            case QWEN2: split_llama3(&c, 1); break;
            default: split_regex(&c, p->steps[s]); break;
            }
            c.b = c.e;
        }
        memcpy(len, tmp, c.n_out * sizeof *len);
        n_len = c.n_out;
    }
    return n_len;
}
