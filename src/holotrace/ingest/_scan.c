/* Columnar scanner of Kineto trace events.
 *
 * scan(piece) reads a run of JSON event objects (the inside of "traceEvents": [...], cut at
 * event boundaries) straight into typed column buffers, without the GIL and without a Python
 * object per event. Strings are interned per piece; Interner merges the pieces' string tables.
 * Which args become columns, and how each is typed, is configured once from holotrace.schema.
 * Times are exact integer nanoseconds computed from the decimal text (never through a double).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include "_scan_util.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { K_INT = 0, K_LABEL, K_FLOAT, K_STR, K_RAW, K_TEXT, K_RAWINT, K_QUIET };
enum { V_STR = 1, V_NUM, V_NAN, V_TRUE, V_FALSE, V_NULL, V_OBJ, V_ARR };
enum { OK = 0, TRUNC = 1, ERR = 2, NOMEM = 3 };
enum { ST_DONE = 0, ST_END = 1, ST_TRUNC = 2, ST_ERR = 3 };
enum { F_TS_OK = 1, F_DUR = 2, F_DUR_OK = 4, F_TS_BAD = 8, F_DUR_BAD = 16 };
/* what a bad value was (the badv rows): a column >= 0 of the specs, or one of these */
enum { W_PID = -2, W_TID = -3, W_ID = -4, W_TS = -10, W_DUR = -11 };
/* times beyond +-2^62 ns (146 years) are out of range: ts + dur, and sums of them, then never overflow */
#define TIME_LIMIT_NS ((int64_t)1 << 62)
#define MAXSPEC 96
#define NSLOT 256

/* ------------------------------------------------------------------ configuration */

static int n_spec = 0;
static char *spec_key[MAXSPEC];
static size_t spec_len[MAXSPEC];
static int spec_kind[MAXSPEC];
static int64_t spec_default[MAXSPEC]; /* bits of the default (double bits for K_FLOAT) */
static int spec_slot[NSLOT];

static int spec_lookup(const uchar *k, size_t n) {
    size_t j = hash_bytes(k, n) & (NSLOT - 1);
    while (spec_slot[j] >= 0) {
        int s = spec_slot[j];
        if (spec_len[s] == n && memcmp(spec_key[s], k, n) == 0) return s;
        j = (j + 1) & (NSLOT - 1);
    }
    return -1;
}

/* ------------------------------------------------------------------ scanner state */

typedef struct { Buf b; int es, made; } Col;

typedef struct {
    const uchar *s, *p, *e;
    int64_t n;
    int status;
    int64_t err_off;
    int ts_float, nonstd, want_spans;
    Strtab st;
    Buf scratch;
    Buf ph, cat, name, bp, sc, pid, tid, ts, dur, id, flags, spans;
    Col col[MAXSPEC];
    Buf c_row, c_key, c_val, bad;
    Buf badv; /* int64 (row, what, offset, length) per value that is out of range or not usable */
    int64_t bad_ex[MAXSPEC][2];
    int32_t empty_id, true_id, false_id;
} Scan;

typedef struct {
    int t, esc;
    const uchar *a, *b;   /* the whole token */
    const uchar *ca, *cb; /* string content */
} Val;

/* the bytes a JSON number token is made of (scan_value skips them with one look-up each) */
static const uchar NUM_CHAR[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['-'] = 1, ['+'] = 1, ['.'] = 1, ['e'] = 1, ['E'] = 1,
};

static inline int is_ws(uchar c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* skip whitespace: most calls find none or one byte; the indentation of pretty-printed traces is skipped 16 bytes
 * a step where SSE2 is there */
static inline void ws(Scan *S) {
    const uchar *p = S->p, *e = S->e; /* a local pointer: the loops run in registers */
    if (p >= e || *p > ' ') return;
    if (*p == ' ' && p + 1 < e && p[1] > ' ') { /* one space, as after most ':' and ',' */
        S->p = p + 1;
        return;
    }
#if defined(__SSE2__)
    const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'), tb = _mm_set1_epi8('\t');
    while (e - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i w = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, sp), _mm_cmpeq_epi8(x, nl)),
                                 _mm_or_si128(_mm_cmpeq_epi8(x, cr), _mm_cmpeq_epi8(x, tb)));
        unsigned m = ~(unsigned)_mm_movemask_epi8(w) & 0xffffu;
        if (m) {
            S->p = p + __builtin_ctz(m);
            return;
        }
        p += 16;
    }
#endif
    while (p < e && is_ws(*p)) p++;
    S->p = p;
}

/* the first '"' or '\\' in [q, e), or e: 16 bytes a step where SSE2 is there (x86-64 always), else byte by byte */
#if defined(__SSE2__)
static inline const uchar *quote_or_escape(const uchar *q, const uchar *e) {
    const __m128i dq = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
    while (e - q >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)q);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, dq), _mm_cmpeq_epi8(x, bs)));
        if (m) return q + __builtin_ctz(m);
        q += 16;
    }
    while (q < e && *q != '"' && *q != '\\') q++;
    return q;
}
#else
static inline const uchar *quote_or_escape(const uchar *q, const uchar *e) {
    while (q < e && *q != '"' && *q != '\\') q++;
    return q;
}
#endif

static int skip_str(Scan *S, Val *v) {
    const uchar *q = S->p + 1, *e = S->e;
    v->esc = 0;
    for (;;) {
        q = quote_or_escape(q, e);
        if (q >= e) return TRUNC;
        if (*q == '"') break;
        v->esc = 1;
        q += 2; /* the escaped character, whatever it is */
    }
    v->ca = S->p + 1;
    v->cb = q;
    S->p = q + 1;
    return OK;
}

static int literal(Scan *S, const char *w, size_t n) {
    size_t have = (size_t)(S->e - S->p);
    if (have < n) return memcmp(S->p, w, have) == 0 ? TRUNC : ERR;
    if (memcmp(S->p, w, n)) return ERR;
    S->p += n;
    return OK;
}

static int scan_value(Scan *S, Val *v) {
    if (S->p >= S->e) return TRUNC;
    uchar c = *S->p;
    int r;
    v->a = S->p;
    switch (c) {
    case '"':
        v->t = V_STR;
        r = skip_str(S, v);
        break;
    case '{': case '[': {
        v->t = c == '{' ? V_OBJ : V_ARR;
        int depth = 0;
        const uchar *q = S->p, *e = S->e;
        r = TRUNC;
        while (q < e) {
            uchar d = *q;
            if (d == '"') {
                S->p = q;
                Val tmp;
                if (skip_str(S, &tmp)) return TRUNC;
                q = S->p;
                continue;
            }
            if (d == '{' || d == '[') depth++;
            else if (d == '}' || d == ']') {
                if (--depth == 0) { q++; r = OK; break; }
            }
            q++;
        }
        S->p = q;
        break;
    }
    case 't': v->t = V_TRUE; r = literal(S, "true", 4); break;
    case 'f': v->t = V_FALSE; r = literal(S, "false", 5); break;
    case 'n': v->t = V_NULL; r = literal(S, "null", 4); break;
    case 'N': v->t = V_NAN; r = literal(S, "NaN", 3); break;
    case 'I': v->t = V_NAN; r = literal(S, "Infinity", 8); break;
    default:
        if (c == '-' && S->p + 1 < S->e && S->p[1] == 'I') {
            S->p++;
            v->t = V_NAN;
            r = literal(S, "Infinity", 8);
            break;
        }
        if (!(c == '-' || (c >= '0' && c <= '9'))) return ERR;
        v->t = V_NUM;
        const uchar *q = S->p, *e = S->e;
        while (q < e && NUM_CHAR[*q]) q++;
        S->p = q;
        r = q >= e ? TRUNC : OK;
    }
    if (v->t == V_NAN && r == OK) S->nonstd = 1;
    v->b = S->p;
    return r;
}

/* unescape string content into S->scratch; -1 on a bad escape */
static int unescape(Scan *S, const uchar *a, const uchar *b) {
    Buf *o = &S->scratch;
    o->n = 0;
    if (buf_reserve(o, (size_t)(b - a) + 4)) return -1;
    while (a < b) {
        uchar c = *a++;
        if (c != '\\') { o->p[o->n++] = (char)c; continue; }
        if (a >= b) return -1;
        c = *a++;
        switch (c) {
        case '"': case '\\': case '/': o->p[o->n++] = (char)c; break;
        case 'b': o->p[o->n++] = '\b'; break;
        case 'f': o->p[o->n++] = '\f'; break;
        case 'n': o->p[o->n++] = '\n'; break;
        case 'r': o->p[o->n++] = '\r'; break;
        case 't': o->p[o->n++] = '\t'; break;
        case 'u': {
            uint32_t cp = 0;
            for (int i = 0; i < 4; i++, a++) {
                if (a >= b) return -1;
                uchar h = *a;
                cp = cp * 16 + (h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
                if (cp > 0xffff) return -1;
            }
            if (cp >= 0xd800 && cp < 0xdc00 && b - a >= 6 && a[0] == '\\' && a[1] == 'u') {
                uint32_t lo = 0;
                for (int i = 2; i < 6; i++) {
                    uchar h = a[i];
                    lo = lo * 16 + (h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
                }
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    a += 6;
                }
            }
            char *w = o->p + o->n;
            if (cp < 0x80) { w[0] = (char)cp; o->n += 1; }
            else if (cp < 0x800) { w[0] = (char)(0xc0 | (cp >> 6)); w[1] = (char)(0x80 | (cp & 0x3f)); o->n += 2; }
            else if (cp < 0x10000) { w[0] = (char)(0xe0 | (cp >> 12)); w[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); w[2] = (char)(0x80 | (cp & 0x3f)); o->n += 3; }
            else { w[0] = (char)(0xf0 | (cp >> 18)); w[1] = (char)(0x80 | ((cp >> 12) & 0x3f)); w[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); w[3] = (char)(0x80 | (cp & 0x3f)); o->n += 4; }
            break;
        }
        default: return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ value conversions */

static int is_float_tok(const Val *v) {
    for (const uchar *q = v->a; q < v->b; q++)
        if (*q == '.' || *q == 'e' || *q == 'E') return 1;
    return 0;
}

/* integer text [-]digits -> int64 (2^63..2^64-1 wrap to negative, as unsigned ids do): 0 ok, 2 not an integer, 3 too big */
static int int_text(const uchar *a, const uchar *b, int64_t *out) {
    int neg = 0;
    if (a < b && *a == '-') { neg = 1; a++; }
    if (a >= b) return 2;
    uint64_t acc = 0;
    if (b - a <= 19) { /* 19 digits fit 64 bits: no overflow check */
        for (; a < b; a++) {
            unsigned d = (unsigned)*a - '0';
            if (d > 9) return 2;
            acc = acc * 10 + d;
        }
    }
    for (; a < b; a++) {
        if (*a < '0' || *a > '9') return 2;
        unsigned d = *a - '0';
        if (acc > (UINT64_MAX - d) / 10) return 3;
        acc = acc * 10 + d;
    }
    if (neg) {
        if (acc > ((uint64_t)1 << 63)) return 3;
        *out = (int64_t)(0 - acc);
    } else *out = (int64_t)acc;
    return 0;
}

/* 0 value, 1 absent (default, no complaint), 2 not an integer, 3 too big for 64 bits */
static int val_int(const Val *v, int label, int64_t *out) {
    switch (v->t) {
    case V_NUM: {
        int r = int_text(v->a, v->b, out); /* digits only (the common case): no float token */
        if (r == 0 || !is_float_tok(v)) return r;
        Dec d;
        int exact;
        if (dec_parse(v->a, v->b, &d) || dec_to_int(&d, 0, out, &exact) || !exact) return 2;
        return 0;
    }
    case V_TRUE: *out = 1; return 0;
    case V_FALSE: *out = 0; return 0;
    case V_NULL: return 1;
    case V_STR: {
        const uchar *a = v->ca, *b = v->cb;
        if (v->esc) return label ? 1 : 2;
        if (label) {
            if (a == b) return 1;
            for (const uchar *q = a; q < b; q++)
                if (*q < '0' || *q > '9') return 1;
            return int_text(a, b, out);
        }
        while (a < b && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\n' || b[-1] == '\r')) b--;
        return int_text(a, b, out);
    }
    default: return 2;
    }
}

/* Python's int(text, 0) for the common forms: decimal, 0x, 0o, 0b */
static int int_base0(const uchar *a, const uchar *b, int64_t *out) {
    while (a < b && (*a == ' ' || *a == '\t')) a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
    int neg = 0;
    if (a < b && (*a == '-' || *a == '+')) { neg = *a == '-'; a++; }
    int base = 10;
    if (b - a > 2 && a[0] == '0') {
        uchar x = a[1] | 0x20;
        base = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 10;
        if (base != 10) a += 2;
    }
    if (a >= b) return -1;
    if (base == 10 && *a == '0' && b - a > 1) {
        for (const uchar *q = a; q < b; q++) if (*q != '0' && *q != '_') return -1;
    }
    uint64_t acc = 0;
    for (; a < b; a++) {
        uchar c = *a;
        if (c == '_') continue;
        unsigned d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
        if (d >= (unsigned)base) return -1;
        if (acc > (UINT64_MAX - d) / base) return -1;
        acc = acc * base + d;
    }
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 0;
}

static int val_time(Scan *S, const Val *v, int64_t *ns, int *isf) {
    *ns = 0;
    *isf = 0;
    if (v->t == V_NAN) { *isf = 1; return v->a[0] == 'N' ? 2 : 0; } /* NaN: no value (missing); Infinity: out of range */
    if (v->t != V_NUM) return 0;
    *isf = is_float_tok(v);
    Dec d;
    int exact;
    if (dec_parse(v->a, v->b, &d) || dec_to_int(&d, 3, ns, &exact) || *ns >= TIME_LIMIT_NS || *ns <= -TIME_LIMIT_NS) {
        *ns = 0;
        return 0;
    }
    (void)S;
    return 1;
}

static int32_t intern(Scan *S, const uchar *a, size_t n) { return strtab_id(&S->st, a, n); }

static int32_t lazy_id(Scan *S, int32_t *slot, const char *text) {
    if (*slot == -2) *slot = intern(S, (const uchar *)text, strlen(text));
    return *slot;
}

/* string id of a value (K_STR: text of scalars; K_TEXT: strings decoded, others as written; K_RAW: as written) */
static int val_sid(Scan *S, const Val *v, int kind, int32_t *out) {
    if (kind == K_RAW) { *out = intern(S, v->a, (size_t)(v->b - v->a)); return OK; }
    if (v->t == V_STR) {
        if (!v->esc) { *out = intern(S, v->ca, (size_t)(v->cb - v->ca)); return OK; }
        if (unescape(S, v->ca, v->cb)) return ERR;
        *out = intern(S, (const uchar *)S->scratch.p, S->scratch.n);
        return OK;
    }
    if (kind == K_STR) {
        if (v->t == V_NULL) { *out = -1; return OK; }
        if (v->t == V_TRUE) { *out = lazy_id(S, &S->true_id, "True"); return OK; }
        if (v->t == V_FALSE) { *out = lazy_id(S, &S->false_id, "False"); return OK; }
    }
    *out = intern(S, v->a, (size_t)(v->b - v->a));
    return OK;
}

static int col_set(Scan *S, int j, int64_t row, int64_t bits) {
    Col *c = &S->col[j];
    if (!c->made) {
        c->made = 1;
        c->es = (spec_kind[j] == K_STR || spec_kind[j] == K_RAW || spec_kind[j] == K_TEXT) ? 4 : 8;
    }
    size_t es = (size_t)c->es, have = c->b.n / es;
    if (have > (size_t)row) have = (size_t)row, c->b.n = have * es; /* repeated key: the last one counts */
    if (c->b.n + ((size_t)row - have + 1) * es > c->b.cap && buf_reserve(&c->b, ((size_t)row - have + 1) * es)) return NOMEM;
    if (es == 4) {
        int32_t *w = (int32_t *)c->b.p;
        for (; have < (size_t)row; have++) w[have] = (int32_t)spec_default[j];
        w[have] = (int32_t)bits;
    } else {
        int64_t *w = (int64_t *)c->b.p;
        for (; have < (size_t)row; have++) w[have] = spec_default[j];
        w[have] = bits;
    }
    c->b.n = (have + 1) * es;
    return OK;
}

/* a value that cannot be used at all: the event is left out (Python side), with the text as evidence */
static int note_bad(Scan *S, int what, const Val *v, int64_t row) {
    int64_t q[4] = {row, what, v->a - S->s, v->b - v->a};
    return buf_put(&S->badv, q, 32) ? NOMEM : OK;
}

/* a repeated key whose last value is usable: forget what an earlier value of it noted (the last one counts) */
static void unnote(Scan *S, int what, int64_t row) {
    int64_t *q = (int64_t *)S->badv.p;
    size_t n = S->badv.n / 32;
    while (n > 0 && q[4 * (n - 1)] == row) {
        if (q[4 * (n - 1) + 1] == what) {
            memmove(q + 4 * (n - 1), q + 4 * n, S->badv.n - 32 * n);
            S->badv.n -= 32;
        }
        n--;
    }
}

static int note_int(Scan *S, int j, int r, const Val *v, int64_t row) {
    if (r == 3) return note_bad(S, j, v, row);
    if (r == 2 && j >= 0) {
        int32_t pair[2] = {(int32_t)row, j};
        if (buf_put(&S->bad, pair, 8)) return NOMEM;
        if (S->bad_ex[j][1] < 0) { S->bad_ex[j][0] = v->a - S->s; S->bad_ex[j][1] = v->b - v->a; }
    }
    return OK;
}

static int store_arg(Scan *S, int j, const Val *v, int64_t row) {
    int kind = spec_kind[j];
    int64_t x = 0;
    int32_t id;
    int r;
    switch (kind) {
    case K_INT: case K_LABEL: case K_QUIET:
        r = val_int(v, kind == K_LABEL, &x);
        if (r == 0) {
            if (S->badv.n) unnote(S, j, row);
            return col_set(S, j, row, x);
        }
        if (r == 3 || (r == 2 && kind == K_INT)) return note_int(S, j, r, v, row);
        return OK;
    case K_FLOAT: {
        double f;
        if (v->t == V_NULL) return OK;
        if (v->t == V_TRUE || v->t == V_FALSE) f = v->t == V_TRUE;
        else if (v->t == V_NUM || v->t == V_NAN || v->t == V_STR) {
            const uchar *a = v->t == V_STR ? v->ca : v->a, *b = v->t == V_STR ? v->cb : v->b;
            char tmp[64];
            size_t n = (size_t)(b - a);
            if (n >= sizeof(tmp)) n = sizeof(tmp) - 1;
            memcpy(tmp, a, n);
            tmp[n] = 0;
            char *end;
            f = strtod(tmp, &end);
            if (end != tmp + n || n == 0) f = NAN;
        } else f = NAN;
        memcpy(&x, &f, 8);
        return col_set(S, j, row, x);
    }
    case K_RAWINT:
        if (v->t == V_NUM && !is_float_tok(v)) {
            r = int_text(v->a, v->b, &x);
            if (r == 3) return note_bad(S, j, v, row);
        } else if (v->t == V_STR && !v->esc) {
            if (int_base0(v->ca, v->cb, &x)) return OK;
        } else if (v->t == V_TRUE || v->t == V_FALSE) x = v->t == V_TRUE;
        else return OK;
        if (S->badv.n) unnote(S, j, row);
        return col_set(S, j, row, x);
    default:
        if (val_sid(S, v, kind, &id)) return ERR;
        if (id == -1 && kind == K_STR && v->t == V_NULL) return OK;
        if (id < 0 && v->t != V_NULL) return NOMEM;
        return col_set(S, j, row, id);
    }
}

#include "_scan_event.h"
