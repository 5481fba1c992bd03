/* Helpers of the event scanner (_scan.c): growable buffers, a string interner and
 * exact decimal arithmetic. Plain C, no Python objects: usable without the GIL. */
#ifndef HOLOTRACE_SCAN_UTIL_H
#define HOLOTRACE_SCAN_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned char uchar;

/* ------------------------------------------------------------------ growable buffer */

typedef struct {
    char *p;
    size_t n, cap; /* bytes */
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    char *q = (char *)realloc(b->p, cap);
    if (!q) return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t k) {
    if (buf_reserve(b, k)) return -1;
    memcpy(b->p + b->n, src, k);
    b->n += k;
    return 0;
}

static void buf_free(Buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ------------------------------------------------------------------ string interner */

typedef struct {
    Buf arena;     /* the strings' bytes, back to back */
    Buf offs;      /* int64 offsets, count + 1 of them */
    Buf hashes;    /* uint64 per string */
    int32_t *slots; /* open addressing: id, or -1 */
    size_t nslots, count;
} Strtab;

static uint64_t hash_bytes(const uchar *s, size_t n) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    h ^= h >> 32;
    return h;
}

static int strtab_init(Strtab *t) {
    memset(t, 0, sizeof(*t));
    t->nslots = 1024;
    t->slots = (int32_t *)malloc(t->nslots * sizeof(int32_t));
    if (!t->slots) return -1;
    memset(t->slots, 0xff, t->nslots * sizeof(int32_t));
    int64_t zero = 0;
    return buf_put(&t->offs, &zero, 8);
}

static void strtab_free(Strtab *t) {
    buf_free(&t->arena);
    buf_free(&t->offs);
    buf_free(&t->hashes);
    free(t->slots);
    t->slots = NULL;
}

static int strtab_grow(Strtab *t) {
    size_t ns = t->nslots * 2;
    int32_t *s = (int32_t *)malloc(ns * sizeof(int32_t));
    if (!s) return -1;
    memset(s, 0xff, ns * sizeof(int32_t));
    const uint64_t *hs = (const uint64_t *)t->hashes.p;
    for (size_t i = 0; i < t->count; i++) {
        size_t j = hs[i] & (ns - 1);
        while (s[j] >= 0) j = (j + 1) & (ns - 1);
        s[j] = (int32_t)i;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = ns;
    return 0;
}

/* id of the string s[0:n], added when new; -1 on memory failure */
static int32_t strtab_id(Strtab *t, const uchar *s, size_t n) {
    uint64_t h = hash_bytes(s, n);
    size_t mask = t->nslots - 1, j = h & mask;
    const uint64_t *hs = (const uint64_t *)t->hashes.p;
    const int64_t *of = (const int64_t *)t->offs.p;
    for (;;) {
        int32_t id = t->slots[j];
        if (id < 0) break;
        if (hs[id] == h && (size_t)(of[id + 1] - of[id]) == n && memcmp(t->arena.p + of[id], s, n) == 0) return id;
        j = (j + 1) & mask;
    }
    int32_t id = (int32_t)t->count;
    int64_t end = (int64_t)(t->arena.n + n);
    if (buf_put(&t->arena, s, n) || buf_put(&t->offs, &end, 8) || buf_put(&t->hashes, &h, 8)) return -1;
    t->slots[j] = id;
    t->count++;
    if (t->count * 2 > t->nslots && strtab_grow(t)) return -1;
    return id;
}

/* ------------------------------------------------------------------ exact decimals */

typedef struct {
    unsigned __int128 mant; /* significant digits kept */
    int exp10;              /* value = mant * 10^exp10 (plus the dropped digits) */
    int neg, sticky;        /* sticky: a nonzero digit was dropped */
} Dec;

static const unsigned __int128 DEC_LIMIT = (unsigned __int128)1000000000000000000ULL * 1000000000000000000ULL; /* 1e36 */

/* parse a JSON number token; 0 if it is one, -1 otherwise */
static int dec_parse(const uchar *a, const uchar *b, Dec *d) {
    memset(d, 0, sizeof(*d));
    const uchar *p = a;
    if (p < b && *p == '-') { d->neg = 1; p++; }
    int digits = 0, in_frac = 0;
    /* fast path: up to 18 digits fit a uint64 */
    uint64_t m64 = 0;
    int kept = 0;
    for (; p < b && kept < 18; p++) {
        uchar c = *p;
        if (c >= '0' && c <= '9') {
            m64 = m64 * 10 + (c - '0');
            kept++;
            if (in_frac) d->exp10--;
        } else if (c == '.' && !in_frac) {
            in_frac = 1;
        } else break;
    }
    digits = kept;
    d->mant = m64;
    for (; p < b; p++) {
        uchar c = *p;
        if (c >= '0' && c <= '9') {
            digits++;
            if (d->mant < DEC_LIMIT) {
                d->mant = d->mant * 10 + (c - '0');
                if (in_frac) d->exp10--;
            } else {
                if (c != '0') d->sticky = 1;
                if (!in_frac) d->exp10++;
            }
        } else if (c == '.' && !in_frac) {
            in_frac = 1;
        } else break;
    }
    if (!digits) return -1;
    if (p < b && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0, e = 0, ed = 0;
        if (p < b && (*p == '+' || *p == '-')) { eneg = *p == '-'; p++; }
        for (; p < b && *p >= '0' && *p <= '9'; p++, ed++)
            if (e < 100000) e = e * 10 + (*p - '0');
        if (!ed) return -1;
        d->exp10 += eneg ? -e : e;
    }
    return p == b ? 0 : -1;
}

static unsigned __int128 pow10_128(int k) {
    unsigned __int128 r = 1;
    while (k-- > 0) r *= 10;
    return r;
}

/* d * 10^scale rounded half-even to an integer; 0 ok, -1 out of int64 range.
 * *exact is set to whether no rounding happened. */
static int dec_to_int(const Dec *d, int scale, int64_t *out, int *exact) {
    int k = d->exp10 + scale;
    unsigned __int128 q;
    *exact = !d->sticky;
    if (d->mant == 0) { *out = 0; return 0; }
    if (k >= 0) {
        if (k > 19) return -1;
        q = d->mant * pow10_128(k);
        if (q / pow10_128(k) != d->mant) return -1;
    } else if (k < -38) {
        q = 0;
        *exact = 0;
    } else {
        unsigned __int128 div = pow10_128(-k), r;
        q = d->mant / div;
        r = d->mant % div;
        if (r) *exact = 0;
        unsigned __int128 half = div / 2;
        if (r > half || (r == half && (d->sticky || (q & 1)))) q++;
    }
    if (d->neg) {
        if (q > ((unsigned __int128)1 << 63)) return -1;
        *out = (int64_t)(0 - (uint64_t)q);
    } else {
        if (q >= ((unsigned __int128)1 << 63)) return -1;
        *out = (int64_t)q;
    }
    return 0;
}

#endif
