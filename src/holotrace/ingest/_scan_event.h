/* Event objects and the piece loop of the scanner; included by _scan.c. */

#define AT(buf, T, row) (((T *)(buf).p)[row])

static int read_key(Scan *S, const uchar **ka, size_t *kn) {
    Val k;
    if (S->p >= S->e) return TRUNC;
    if (*S->p != '"') return ERR;
    if (skip_str(S, &k)) return TRUNC;
    if (k.esc) {
        if (unescape(S, k.ca, k.cb)) return ERR;
        *ka = (const uchar *)S->scratch.p;
        *kn = S->scratch.n;
    } else {
        *ka = k.ca;
        *kn = (size_t)(k.cb - k.ca);
    }
    ws(S);
    if (S->p >= S->e) return TRUNC;
    if (*S->p != ':') return ERR;
    S->p++;
    ws(S);
    return S->p >= S->e ? TRUNC : OK;
}

/* after a value inside an object: 0 another member follows, 1 the object closed */
static int next_member(Scan *S, int *closed) {
    ws(S);
    if (S->p >= S->e) return TRUNC;
    if (*S->p == ',') { S->p++; ws(S); *closed = 0; return S->p >= S->e ? TRUNC : OK; }
    if (*S->p == '}') { S->p++; *closed = 1; return OK; }
    return ERR;
}

static int parse_args(Scan *S, int64_t row) {
    int r, closed = 0;
    S->p++;
    ws(S);
    if (S->p >= S->e) return TRUNC;
    if (*S->p == '}') { S->p++; return OK; }
    while (!closed) {
        const uchar *ka;
        size_t kn;
        Val v;
        if ((r = read_key(S, &ka, &kn))) return r;
        int j = spec_lookup(ka, kn);
        if ((r = scan_value(S, &v))) return r;
        if (j >= 0 && (r = store_arg(S, j, &v, row))) return r;
        if ((r = next_member(S, &closed))) return r;
    }
    return OK;
}

/* ph "C": every numeric arg is a (row, series, value) counter sample */
static int counter_args(Scan *S, const uchar *a, const uchar *b, int64_t row) {
    const uchar *save_p = S->p, *save_e = S->e;
    int r = OK, closed = 0;
    S->p = a + 1;
    S->e = b;
    ws(S);
    if (S->p < S->e && *S->p == '}') closed = 1;
    while (!closed && r == OK) {
        const uchar *ka;
        size_t kn;
        Val v;
        if ((r = read_key(S, &ka, &kn))) break;
        int32_t key = intern(S, ka, kn);
        if ((r = scan_value(S, &v))) break;
        if (v.t == V_NAN) {
            double f = v.a[0] == 'N' ? NAN : v.a[0] == '-' ? -INFINITY : INFINITY;
            int32_t r32 = (int32_t)row;
            if (buf_put(&S->c_row, &r32, 4) || buf_put(&S->c_key, &key, 4) || buf_put(&S->c_val, &f, 8)) r = NOMEM;
        } else if (v.t == V_NUM) {
            char tmp[64];
            size_t n = (size_t)(v.b - v.a);
            if (n < sizeof(tmp)) {
                memcpy(tmp, v.a, n);
                tmp[n] = 0;
                double f = strtod(tmp, NULL);
                int32_t r32 = (int32_t)row;
                if (buf_put(&S->c_row, &r32, 4) || buf_put(&S->c_key, &key, 4) || buf_put(&S->c_val, &f, 8)) r = NOMEM;
            }
        }
        if (r == OK) r = next_member(S, &closed);
    }
    S->p = save_p;
    S->e = save_e;
    return r == TRUNC ? OK : r;
}

static inline int put_n(Buf *b, const void *v, size_t k) {
    if (b->n + k > b->cap && buf_reserve(b, k)) return NOMEM;
    memcpy(b->p + b->n, v, k); /* k is a constant at each call: compiled to a plain store */
    b->n += k;
    return OK;
}

static int push_defaults(Scan *S) {
    int32_t m1 = -1;
    int64_t m1l = -1, z = 0;
    uint8_t f = 0;
    int64_t sp[2] = {-1, -1};
    if (put_n(&S->ph, &m1, 4) || put_n(&S->cat, &m1, 4) || put_n(&S->name, &m1, 4) || put_n(&S->bp, &m1, 4) ||
        put_n(&S->sc, &m1, 4) || put_n(&S->pid, &m1l, 8) || put_n(&S->tid, &m1l, 8) || put_n(&S->ts, &z, 8) ||
        put_n(&S->dur, &z, 8) || put_n(&S->id, &m1l, 8) || put_n(&S->flags, &f, 1))
        return NOMEM;
    if (S->want_spans && put_n(&S->spans, sp, 16)) return NOMEM;
    return OK;
}

static int parse_event(Scan *S) {
    int64_t row = S->n;
    int r, closed = 0, ph_set = 0, counter = 0, complete = 0;
    const uchar *args_a = NULL, *args_b = NULL;
    if ((r = push_defaults(S))) return r;
    S->p++;
    ws(S);
    if (S->p >= S->e) return TRUNC;
    if (*S->p == '}') { S->p++; closed = 1; }
    while (!closed) {
        const uchar *ka;
        size_t kn;
        Val v;
        int32_t id;
        int64_t x;
        if ((r = read_key(S, &ka, &kn))) return r;
        int field = 0; /* 1 ph 2 cat 3 name 4 bp 5 s 6 pid 7 tid 8 ts 9 dur 10 id 11 args */
        switch (kn) {
        case 1: if (ka[0] == 's') field = 5; break;
        case 2:
            if (!memcmp(ka, "ph", 2)) field = 1;
            else if (!memcmp(ka, "ts", 2)) field = 8;
            else if (!memcmp(ka, "id", 2)) field = 10;
            else if (!memcmp(ka, "bp", 2)) field = 4;
            break;
        case 3:
            if (!memcmp(ka, "cat", 3)) field = 2;
            else if (!memcmp(ka, "pid", 3)) field = 6;
            else if (!memcmp(ka, "tid", 3)) field = 7;
            else if (!memcmp(ka, "dur", 3)) field = 9;
            break;
        case 4:
            if (!memcmp(ka, "name", 4)) field = 3;
            else if (!memcmp(ka, "args", 4)) field = 11;
            break;
        }
        if (field == 11 && *S->p == '{') {
            args_a = S->p;
            if ((r = parse_args(S, row))) return r;
            args_b = S->p;
        } else {
            if ((r = scan_value(S, &v))) return r;
            switch (field) {
            case 1: case 2: case 3: case 4: case 5:
                if (val_sid(S, &v, K_STR, &id)) return ERR;
                if (id < 0 && v.t != V_NULL) return NOMEM;
                if (field == 1) {
                    ph_set = 1;
                    counter = v.t == V_STR && v.cb - v.ca == 1 && v.ca[0] == 'C';
                    complete = v.t == V_STR && v.cb - v.ca == 1 && v.ca[0] == 'X';
                }
                AT(field == 1 ? S->ph : field == 2 ? S->cat : field == 3 ? S->name : field == 4 ? S->bp : S->sc, int32_t, row) = id;
                break;
            case 6: case 7: case 10:
                r = val_int(&v, field != 10, &x);
                if (r == 0) {
                    AT(field == 6 ? S->pid : field == 7 ? S->tid : S->id, int64_t, row) = x;
                    if (S->badv.n) unnote(S, field == 6 ? W_PID : field == 7 ? W_TID : W_ID, row);
                } else if (r == 3 && (r = note_bad(S, field == 6 ? W_PID : field == 7 ? W_TID : W_ID, &v, row))) return r;
                break;
            case 8: case 9: {
                /* a repeated key: the last one counts, flags included */
                uint8_t *fl = &AT(S->flags, uint8_t, row);
                if (field == 8) *fl &= (uint8_t)~(F_TS_OK | F_TS_BAD);
                else *fl &= (uint8_t)~(F_DUR | F_DUR_OK | F_DUR_BAD);
                AT(field == 8 ? S->ts : S->dur, int64_t, row) = 0;
                if (S->badv.n) unnote(S, field == 8 ? W_TS : W_DUR, row);
                if (v.t == V_NULL) break; /* missing: no value */
                int isf, ok = val_time(S, &v, &x, &isf); /* 1 ok, 0 unusable, 2 NaN (no value: missing) */
                if (ok != 1 && (r = note_bad(S, field == 8 ? W_TS : W_DUR, &v, row))) return r;
                if (field == 8) {
                    AT(S->ts, int64_t, row) = x;
                    *fl |= ok == 1 ? F_TS_OK : ok == 0 ? F_TS_BAD : 0;
                    S->ts_float |= isf;
                } else {
                    AT(S->dur, int64_t, row) = x;
                    *fl |= F_DUR | (ok == 1 ? F_DUR_OK : ok == 0 ? F_DUR_BAD : 0);
                }
                break;
            }
            case 11:
                args_a = v.a;
                args_b = v.b;
                break;
            }
        }
        if ((r = next_member(S, &closed))) return r;
    }
    if (complete) AT(S->flags, uint8_t, row) |= F_DUR; /* an X event without a usable dur is still an event with a duration */
    if (!ph_set) {
        int32_t e = lazy_id(S, &S->empty_id, "");
        if (e < 0) return NOMEM;
        AT(S->ph, int32_t, row) = e;
    }
    if (args_a && S->want_spans) {
        AT(S->spans, int64_t, 2 * row) = args_a - S->s;
        AT(S->spans, int64_t, 2 * row + 1) = args_b - S->s;
    }
    if (counter && args_a && *args_a == '{' && (r = counter_args(S, args_a, args_b, row))) return r;
    S->n++;
    return OK;
}

static void scan_run(Scan *S) {
    int r = OK;
    ws(S);
    if (S->p < S->e && *S->p == ']') { S->status = ST_END; goto done; }
    while (S->p < S->e) {
        if (*S->p != '{') { r = ERR; break; }
        if ((r = parse_event(S))) break;
        ws(S);
        if (S->p >= S->e) break;
        if (*S->p == ',') {
            S->p++;
            ws(S);
            if (S->p >= S->e) { r = TRUNC; break; }
            continue;
        }
        if (*S->p == ']') { S->status = ST_END; goto done; }
        r = ERR;
        break;
    }
    S->status = r == OK ? ST_DONE : r == TRUNC ? ST_TRUNC : r == NOMEM ? -1 : ST_ERR;
done:
    S->err_off = S->p - S->s;
    /* drop the rows of an event that was not completed; bring every arg column to n rows */
    int64_t n = S->n;
    S->ph.n = S->cat.n = S->name.n = S->bp.n = S->sc.n = (size_t)n * 4;
    S->pid.n = S->tid.n = S->ts.n = S->dur.n = S->id.n = (size_t)n * 8;
    S->flags.n = (size_t)n;
    if (S->want_spans) S->spans.n = (size_t)n * 16;
    for (int j = 0; j < n_spec; j++) {
        Col *c = &S->col[j];
        if (!c->made) continue;
        size_t es = (size_t)c->es, have = c->b.n / es;
        if (have > (size_t)n) c->b.n = (size_t)n * es;
        else if (have < (size_t)n) {
            if (buf_reserve(&c->b, ((size_t)n - have) * es)) { S->status = -1; return; }
            int64_t d = spec_default[j];
            int32_t d4 = (int32_t)d;
            for (; have < (size_t)n; have++) buf_put(&c->b, es == 4 ? (void *)&d4 : (void *)&d, es);
        }
    }
}

#include "_scan_py.h"
