/* The fast path's byte work in one pass over a span (hpcbench/parse/fastpath.py says what it must find; a
 * pure-Python version of the same work runs where this module was not built, and tests compare the two).
 *
 * Per line of buf[first+1 .. last] (the lines after the newline at `first`):
 *   - its window (its first `width` bytes): runs of lines that share one, whose window the host regex has
 *     not matched before, are handed back for Python to test (known.unknown_from_runs);
 *   - a line with no "NCCL " tag (a bare pre-2.3 INFO line of a known host?) or more than one (a second
 *     prefix glued on, whose host the line path reads?) is handed back whole, its message not looked at;
 *     so is a line whose prefix is not plain (known.py's TAIL; plain_line), its message looked at;
 *   - else its message, as fastpath.MSG finds it: "NCCL INFO" + blank + a fact-carrying start, or
 *     "NCCL WARN" + blank, to the end of the line. A message not read before is added to the set and
 *     handed back with its line's bounds; a message with a "volatile" start (init lines, which differ per
 *     communicator) is handed back unless add_inits was given one that differs from it only in the digits
 *     of its 0x numbers; every WARN is also handed back, each copy;
 *   - with a width, a line with no tag that the line path reads alone (own_print: a training's print, which
 *     continues no line and is continued by none) is handed back as a print, in no run of windows;
 *   - with a width and cut_edges, a new message that is an edge (edge_cut, on a plain line that starts with
 *     its host) is handed back cut, as nccl.NcclState.read_edges reads it, instead of with its bounds.
 * The set keeps a copy of each message and compares bytes, so a hash collision never hides a message. Where
 * lines start with their host, a rank's next message is looked for first where its sequence of messages last
 * time says (Rank): a 1024-rank job's lines then cost one compare each, no hash. heads() finds the lines where
 * a host may first show, for the first span's hosts (known.newcomers). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <ctype.h>
#include <limits.h>
#include <string.h>

/* forced: GCC keeps a call for a function used in several places, and this one runs for every line */
#define INLINE static inline __attribute__((always_inline))
#define ABI 6 /* fastpath.py refuses a build of another version (a stale in-place build) */
#define NPREFIX 64

typedef struct {
    uint64_t hash;
    uint32_t off, len; /* len 0: an empty slot (a message is never empty) */
} Slot;

/* A set of byte strings: open addressing over hashes, the strings themselves in an arena, in the order
 * they came, each after a header: its length and the offset of the string looked up after it last time.
 * Logs print the same messages in the same order again and again (each communicator's setup), so that
 * one is tried first: a hit then costs one compare, no hash and no random access into the table. Past
 * its bounds the set starts again (as the Python set does at fastpath.SEEN_MAX): more is handed on,
 * never less. */
typedef struct {
    uint32_t len, next; /* next: NO_NEXT, or a record's offset */
} Head;

#define HEAD ((size_t)sizeof(Head))
#define NO_NEXT UINT32_MAX
#define DEAD 0x80000000u /* in a header's len: the string was forgotten (set_forget) */

typedef struct {
    Slot *slots; /* off: of the string's header in the arena */
    size_t cap, used; /* cap: a power of two */
    char *arena;
    size_t alen, acap, max_entries, max_bytes;
    size_t last;  /* arena offset of the string found or added last; NONE */
    size_t mark;  /* arena length when the last scan began: what it added is after it */
    uint32_t gen; /* counts clears and rollbacks: offsets kept elsewhere (Rank) are valid while it stays */
} Set;

#define NONE ((size_t)-1)

/* One rank's messages (a prefix's, its thread id left out), in the order it printed them last: each rank
 * prints the same sequence for every communicator it joins, while a message many ranks print (a NIC list, a
 * tuning line) is followed by a different one in each, which the set's one successor per string cannot
 * tell. The offsets are the set's while its gen is `gen`. */
#define RANK_SEQ 256    /* messages of a rank's sequence kept */
#define RANK_SLOTS 8192 /* ranks followed (a power of two); the lines of others go without */
typedef struct {
    uint64_t key; /* 0: an empty slot */
    uint32_t gen, pos, len, first; /* first: seq[0], beside the key (one cache line, where the rank changes) */
    uint32_t init, init_gen;       /* its init line last read (NO_NEXT: none), in the set of init lines */
    uint32_t *seq;
} Rank;

typedef struct {
    const char *s;
    Py_ssize_t n;
    uint64_t value[2], mask[2]; /* its first 16 bytes, '#' and bytes past its end masked out (starts_with) */
    int digits;                 /* it holds a '#' */
} Prefix;

typedef struct {
    PyObject_HEAD
    Set msgs;  /* messages read */
    Set inits; /* init lines read, with each 0x number masked: they differ per communicator only there */
    char *scratch;
    size_t scratch_cap;
    PyObject *keep; /* the prefix bytes objects, alive as long as this object */
    Rank *ranks;    /* RANK_SLOTS of them, or NULL until a scan needs them */
    Prefix facts[NPREFIX], volatiles[NPREFIX], own[NPREFIX], not_edge[NPREFIX];
    int nfacts, nvolatiles, nown, nnot_edge; /* not_edge: strings that keep an edge line from scan's edges */
    Py_ssize_t wrap; /* prefixes.WRAP_MIN: a shorter line was not cut by a terminal (0: not known) */
    uint64_t by_first[256]; /* the facts (bits) that a message's first byte may start */
    char volatile_first[256]; /* whether a volatile may start with this byte */
} Messages;

static uint64_t load8(const char *p) {
    uint64_t k;
    memcpy(&k, p, 8);
    return k;
}

static uint64_t mix(uint64_t h) {
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    return h ^ (h >> 32);
}

/* Four independent lanes, so the multiplies overlap: a message costs a few ns, not one multiply's latency
 * per 8 bytes. Only the spread matters (a match is confirmed by comparing bytes). */
static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t a = 0x9E3779B97F4A7C15ULL ^ n, b = 0xC2B2AE3D27D4EB4FULL, c = 0x165667B19E3779F9ULL,
             d = 0x27D4EB2F165667C5ULL;
    const uint64_t K = 0xff51afd7ed558ccdULL;
    for (; n >= 32; p += 32, n -= 32) {
        a = (a ^ load8(p)) * K;
        b = (b ^ load8(p + 8)) * K;
        c = (c ^ load8(p + 16)) * K;
        d = (d ^ load8(p + 24)) * K;
        a ^= a >> 29, b ^= b >> 29, c ^= c >> 29, d ^= d >> 29;
    }
    for (; n >= 8; p += 8, n -= 8) a = mix(a ^ load8(p));
    uint64_t k = 0;
    memcpy(&k, p, n);
    return mix(a ^ k ^ mix(b) ^ (mix(c) << 1) ^ (mix(d) << 2));
}

static void set_clear(Set *m) {
    m->gen++;
    if (m->slots) memset(m->slots, 0, m->cap * sizeof(Slot));
    m->used = 0;
    m->alen = m->mark = 0;
    m->last = NONE;
}

static void set_free(Set *m) {
    PyMem_Free(m->slots);
    PyMem_Free(m->arena);
    memset(m, 0, sizeof *m);
    m->last = NONE;
}

static int set_grow(Set *m) {
    size_t cap = m->cap ? 2 * m->cap : 1024;
    Slot *slots = PyMem_Calloc(cap, sizeof(Slot));
    if (!slots) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        Slot s = m->slots[i];
        if (!s.len) continue;
        size_t j = s.hash & (cap - 1);
        while (slots[j].len) j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    PyMem_Free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

static Head head_at(const Set *m, size_t off) {
    Head h;
    memcpy(&h, m->arena + off, HEAD);
    return h;
}

/* the string at `off` was looked up after the last one */
static void set_follow(Set *m, size_t off) {
    if (m->last != NONE) {
        uint32_t next = (uint32_t)off;
        memcpy(m->arena + m->last + offsetof(Head, next), &next, sizeof next);
    }
    m->last = off;
}

/* whether the string looked up after the last one, last time, is p[0:n] */
static int set_next_is(Set *m, const char *p, size_t n) {
    if (m->last == NONE) return 0;
    Head h = head_at(m, m->last);
    if (h.next == NO_NEXT) return 0;
    size_t next = h.next;
    h = head_at(m, next);
    if (h.len != n || memcmp(m->arena + next + HEAD, p, n) != 0) return 0;
    m->last = next;
    return 1;
}

static int set_has(Set *m, const char *p, size_t n, uint64_t h) {
    if (!m->cap) return 0;
    for (size_t j = h & (m->cap - 1); m->slots[j].len; j = (j + 1) & (m->cap - 1)) {
        const Slot *s = &m->slots[j];
        if (s->hash == h && s->len == n && memcmp(m->arena + s->off + HEAD, p, n) == 0) {
            set_follow(m, s->off);
            return 1;
        }
    }
    return 0;
}

/* 0, or -1: out of memory. The string must not be in the set. */
static int set_add(Set *m, const char *p, size_t n, uint64_t h) {
    if (m->used >= m->max_entries || m->alen + HEAD + n > m->max_bytes) set_clear(m);
    if (2 * (m->used + 1) > m->cap && set_grow(m) < 0) return -1;
    if (m->alen + HEAD + n > m->acap) {
        size_t acap = m->acap ? m->acap : 1 << 16;
        while (acap < m->alen + HEAD + n) acap *= 2;
        char *a = PyMem_Realloc(m->arena, acap);
        if (!a) return -1;
        m->arena = a;
        m->acap = acap;
    }
    Head head = {(uint32_t)n, NO_NEXT};
    memcpy(m->arena + m->alen, &head, HEAD);
    memcpy(m->arena + m->alen + HEAD, p, n);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].len) j = (j + 1) & (m->cap - 1);
    m->slots[j] = (Slot){h, (uint32_t)m->alen, head.len};
    set_follow(m, m->alen);
    m->alen += HEAD + n;
    m->used++;
    return 0;
}

/* Take out what was added since the mark. Emptying their slots is enough: a string kept from before was
 * placed when every slot between its hash's and its own was taken by strings older still, so no hole made
 * here lies on its probe path. A kept string's `next` that points past the mark is unset: the space will
 * hold other strings. What a clear forgot is not brought back: the set then knows less, and hands on
 * more. */
static void set_rollback(Set *m) {
    size_t mask = m->cap - 1;
    m->gen++;
    for (size_t off = m->mark; off < m->alen;) {
        Head h = head_at(m, off);
        size_t j = hash_bytes(m->arena + off + HEAD, h.len & ~DEAD) & mask;
        while (!(m->slots[j].len && m->slots[j].off == off)) j = (j + 1) & mask; /* a forgotten one's too */
        m->slots[j].len = 0;
        m->used--;
        off += HEAD + (h.len & ~DEAD);
    }
    for (size_t off = 0; off < m->mark;) {
        Head h = head_at(m, off);
        if (h.next != NO_NEXT && h.next >= m->mark) {
            h.next = NO_NEXT;
            memcpy(m->arena + off, &h, HEAD);
        }
        off += HEAD + (h.len & ~DEAD);
    }
    m->alen = m->mark;
    m->last = NONE;
}

/* Forget p[0:n], if kept: its slot stays, with a hash no lookup computes (~h), so the probe paths through
 * it hold; its header is marked DEAD, so no successor link matches it. Added again, it is a new string. */
static void set_forget(Set *m, const char *p, size_t n) {
    if (!m->cap) return;
    uint64_t h = hash_bytes(p, n);
    for (size_t j = h & (m->cap - 1); m->slots[j].len; j = (j + 1) & (m->cap - 1)) {
        Slot *s = &m->slots[j];
        if (s->hash == h && s->len == n && memcmp(m->arena + s->off + HEAD, p, n) == 0) {
            s->hash = ~h;
            Head head = head_at(m, s->off);
            head.len |= DEAD;
            memcpy(m->arena + s->off, &head, HEAD);
            if (m->last == s->off) m->last = NONE;
            return;
        }
    }
}

/* 1: read before; 0: new, and now kept; -1: out of memory */
static int set_seen_or_add(Set *m, const char *p, size_t n) {
    if (set_next_is(m, p, n)) return 1;
    uint64_t h = hash_bytes(p, n);
    if (set_has(m, p, n, h)) return 1;
    return set_add(m, p, n, h);
}

/* The rank of a plain line's prefix [s, q) (q: its "NCCL " tag; plain_prefix checked its shape): the slot of
 * the prefix less its ":tid", made or found in `ranks` (allocated on first use); NULL when the table is full
 * or out of memory (the line goes without). */
static Rank *rank_of(Rank **ranks, const char *s, const char *q) {
    const char *p = q - 2; /* at "]" of "[dev] " */
    while (p > s && p[-1] != '[') p--;
    const char *dev = p, *tid = p - 2; /* tid: at the last digit of the thread id, before " [" */
    while (tid > s && *tid != ':') tid--;
    uint64_t key = mix(hash_bytes(s, (size_t)(tid - s)) ^ (hash_bytes(dev, (size_t)(q - 2 - dev)) << 1)) | 1;
    if (!*ranks && !(*ranks = PyMem_Calloc(RANK_SLOTS, sizeof(Rank)))) return NULL;
    for (size_t j = key & (RANK_SLOTS - 1), tries = 0; tries < 16; j = (j + 1) & (RANK_SLOTS - 1), tries++) {
        Rank *r = &(*ranks)[j];
        if (r->key == key) return r;
        if (!r->key) {
            if (!(r->seq = PyMem_Malloc(RANK_SEQ * sizeof(uint32_t)))) return NULL;
            r->key = key, r->gen = 0, r->pos = r->len = 0, r->init = NO_NEXT;
            return r;
        }
    }
    return NULL;
}

static void ranks_free(Rank **ranks) {
    if (!*ranks) return;
    for (size_t j = 0; j < RANK_SLOTS; j++) PyMem_Free((*ranks)[j].seq);
    PyMem_Free(*ranks);
    *ranks = NULL;
}

/* The rank's next messages are most likely the next lines': their bytes are fetched while those lines are
 * found (the ones after the next too: one line's work is shorter than a fetch from memory). */
#define PREFETCH 2 /* lines ahead: 3 or 4 were no faster on the benchmark's log */
static void rank_prefetch(const Set *m, const Rank *r) {
    for (uint32_t i = r->pos; i < r->len && i < r->pos + PREFETCH; i++) {
        const char *a = m->arena + r->seq[i];
        __builtin_prefetch(a);
        __builtin_prefetch(a + 64);
    }
}

/* Whether the init line p[0:n] (masked) is in m, trying first rank r's last (r may be NULL), which r then follows:
 * a rank prints one init line per communicator, the same but for its 0x numbers */
static int init_seen_by(Set *m, Rank *r, const char *p, size_t n) {
    if (r && r->init != NO_NEXT && r->init_gen == m->gen) {
        Head h = head_at(m, r->init);
        if (h.len == n && memcmp(m->arena + r->init + HEAD, p, n) == 0) {
            m->last = r->init;
            return 1;
        }
    }
    int seen = set_next_is(m, p, n) || set_has(m, p, n, hash_bytes(p, n));
    if (seen && r) r->init = (uint32_t)m->last, r->init_gen = m->gen;
    return seen;
}

/* set_seen_or_add, trying first the message that came next in rank r's sequence (r may be NULL); r then
 * follows the message: on in its sequence, back to its start, or a new sequence from here */
static int seen_or_add_by(Set *m, Rank *r, const char *p, size_t n) {
    if (r && r->gen == m->gen && r->pos < r->len) {
        size_t off = r->seq[r->pos];
        Head h = head_at(m, off);
        if (h.len == n && memcmp(m->arena + off + HEAD, p, n) == 0) { /* a forgotten one's len has DEAD set */
            r->pos++;
            m->last = off;
            rank_prefetch(m, r);
            return 1;
        }
    }
    int seen = set_seen_or_add(m, p, n);
    if (seen < 0 || !r) return seen;
    uint32_t off = (uint32_t)m->last;
    if (r->gen != m->gen) r->gen = m->gen, r->pos = r->len = 0;
    if (r->len && r->first == off)
        r->pos = 1;
    else if (r->pos < RANK_SEQ)
        r->seq[r->pos++] = off, r->len = r->pos, r->first = r->seq[0];
    rank_prefetch(m, r);
    return seen;
}

/* p[0:n] with each 0x number's digits as one '\n' (never in a line), into the scratch buffer; its length,
 * or -1: out of memory */
static Py_ssize_t masked(Messages *m, const char *p, size_t n) {
    if (n > m->scratch_cap) {
        char *s = PyMem_Realloc(m->scratch, n);
        if (!s) return -1;
        m->scratch = s;
        m->scratch_cap = n;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) { /* the bytes through the next 'x' as they are, then its digits as one '\n' */
        const char *x = memchr(p + i, 'x', n - i);
        size_t upto = x ? (size_t)(x - p) + 1 : n;
        memcpy(m->scratch + k, p + i, upto - i);
        k += upto - i;
        i = upto;
        if (x && upto >= 2 && p[upto - 2] == '0' && i < n && isxdigit((unsigned char)p[i])) {
            while (i < n && isxdigit((unsigned char)p[i])) i++;
            m->scratch[k++] = '\n';
        }
    }
    return (Py_ssize_t)k;
}

/* '#' in a prefix stands for a digit. Where 16 bytes can be read, two masked 8-byte compares decide, but for
 * the '#'s. */
INLINE int starts_with(const char *t, Py_ssize_t n, const Prefix *p) {
    if (p->n > n) return 0;
    if (n >= 16 && p->n <= 16) {
        if (((load8(t) ^ p->value[0]) & p->mask[0]) | ((load8(t + 8) ^ p->value[1]) & p->mask[1])) return 0;
        if (!p->digits) return 1;
    }
    for (Py_ssize_t i = 0; i < p->n; i++) {
        char c = p->s[i];
        if (c == '#' ? (t[i] < '0' || t[i] > '9') : t[i] != c) return 0;
    }
    return 1;
}

static int any_start(const char *t, Py_ssize_t n, const Prefix *ps, int k) {
    for (int i = 0; i < k; i++)
        if (starts_with(t, n, &ps[i])) return 1;
    return 0;
}

static int fact_start(const Messages *m, const char *t, Py_ssize_t n) {
    if (n < 1) return 0;
    for (uint64_t bits = m->by_first[(unsigned char)t[0]]; bits; bits &= bits - 1)
        if (starts_with(t, n, &m->facts[__builtin_ctzll(bits)])) return 1;
    return 0;
}

/* the kind of message at q ("NCCL " found there): 1 a fact-carrying INFO, 2 a WARN, 0 neither */
static int kind_at(const Messages *m, const char *q, const char *e) {
    if (e - q < 10 || (q[9] != ' ' && q[9] != '\t')) return 0;
    if (memcmp(q + 5, "INFO", 4) == 0) return fact_start(m, q + 10, e - q - 10);
    return memcmp(q + 5, "WARN", 4) == 0 ? 2 : 0;
}

static int digits_before(const char *s, const char **p) {
    const char *d = *p;
    while (*p > s && (*p)[-1] >= '0' && (*p)[-1] <= '9') --*p;
    return *p < d;
}

static int alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
/* ranges, not isalnum: no call into the C library per byte (the spans are ASCII) */
static int host_char(char c) { return alnum(c) || c == '_' || c == '.' || c == '*' || c == '-'; }

/* Whether the line [s, end), whose one "NCCL " tag is at q, is plain after its host, as known.TAIL reads
 * it: ":pid:tid [dev] NCCL INFO|WARN" and a blank, its message not starting with "host:pid:tid " (which
 * the line path reads as a second prefix). `bare`: the line starts with its host (no launcher tag or time
 * stamp), so no ':' may come before ":pid". */
/* plain_line's test of the line's first bytes, up to its message (q + 10): theirs alone */
static int plain_prefix(const char *s, const char *q, const char *end, int bare) {
    if (end - q < 10 || (q[9] != ' ' && q[9] != '\t') || (memcmp(q + 5, "INFO", 4) && memcmp(q + 5, "WARN", 4)))
        return 0;
    const char *p = q;
    if (p - s < 2 || p[-1] != ' ' || p[-2] != ']') return 0;
    p -= 2;
    if (!digits_before(s, &p) || p == s || *--p != '[' || p == s || *--p != ' ') return 0;
    for (int k = 0; k < 2; k++)
        if (!digits_before(s, &p) || p == s || *--p != ':') return 0;
    return !(bare && memchr(s, ':', (size_t)(p - s)));
}

/* plain_line's test of the message [m, end) */
static int plain_message(const char *m, const char *end) {
    if (m == end || !alnum(*m)) return 1;
    while (m < end && host_char(*m)) m++;
    for (int k = 0; k < 2; k++) {
        if (m == end || *m++ != ':' || m == end || *m < '0' || *m > '9') return 1;
        while (m < end && *m >= '0' && *m <= '9') m++;
    }
    return m == end || *m != ' ';
}

/* The line [s, end), whose one "NCCL " tag is at q, is plain: plain_prefix, then plain_message. A rank prints
 * line after line with the same prefix, so the prefix's answer is kept for the next line (`last`: its bytes,
 * length and answer) and reused where the next line's first bytes are the same. */
typedef struct {
    const char *s;
    size_t n;
    int plain, ranked; /* ranked: `rank` is the prefix's (rank_of, made when first needed) */
    Rank *rank;
} Last;

/* The rank of a line [s, ...) whose prefix `last` holds (made on first need), where `bare` (a plain line that
 * starts with its host: with a time stamp before it, each line's prefix would be another); else NULL. Its init
 * line's bytes are fetched then: a rank prints it after a dozen other lines. */
static Rank *line_rank(Messages *self, Last *last, int bare, const char *s, const char *q) {
    if (!bare) return NULL;
    if (!last->ranked) {
        Rank *r = last->rank = rank_of(&self->ranks, s, q);
        last->ranked = 1;
        if (r && r->init != NO_NEXT && r->init_gen == self->inits.gen) __builtin_prefetch(self->inits.arena + r->init);
        if (r && r->len > 1) __builtin_prefetch(r->seq + 1); /* read when its first line was found */
    }
    return last->rank;
}

static int plain_line(Last *last, const char *s, const char *q, const char *end, int bare) {
    if (end - q < 10) return 0;
    size_t n = (size_t)(q + 10 - s);
    if (!(last->s && last->n == n && memcmp(last->s, s, n) == 0))
        *last = (Last){s, n, plain_prefix(s, q, end, bare), 0, NULL};
    return last->plain && plain_message(q + 10, end);
}

static int load_prefixes(PyObject *seq, Prefix *out, int *k, PyObject *keep) {
    PyObject *fast = PySequence_Fast(seq, "prefixes: a sequence of bytes");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > NPREFIX) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many prefixes");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) == 0 || PyList_Append(keep, b) < 0) {
            Py_DECREF(fast);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "prefixes: non-empty bytes");
            return -1;
        }
        Prefix *p = &out[i];
        *p = (Prefix){PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), {0, 0}, {0, 0}, 0};
        unsigned char v[16] = {0}, k[16] = {0};
        for (Py_ssize_t j = 0; j < p->n; j++) {
            if (p->s[j] == '#') p->digits = 1;
            if (j < 16 && p->s[j] != '#') v[j] = (unsigned char)p->s[j], k[j] = 0xff;
        }
        memcpy(p->value, v, 16);
        memcpy(p->mask, k, 16);
    }
    *k = (int)n;
    Py_DECREF(fast);
    return 0;
}

/* an empty set with these bounds; -1 (ValueError) for bounds out of range */
static int set_init(Set *m, Py_ssize_t max_entries, Py_ssize_t max_bytes) {
    if (max_entries < 1 || max_bytes < 1 || max_bytes > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_entries and max_bytes: from 1, bytes below 4 GiB");
        return -1;
    }
    set_free(m);
    m->max_entries = (size_t)max_entries;
    m->max_bytes = (size_t)max_bytes;
    return 0;
}

static int Messages_init(Messages *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"facts", "volatiles", "max_entries", "max_bytes", "own", "wrap", "not_edge", NULL};
    PyObject *facts, *volatiles, *own = NULL, *not_edge = NULL;
    Py_ssize_t me, mb;
    self->wrap = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOnn|OnO", names, &facts, &volatiles, &me, &mb, &own, &self->wrap,
                                     &not_edge))
        return -1;
    ranks_free(&self->ranks); /* __init__ again: its sequences hold offsets of the sets set_init empties */
    if (set_init(&self->msgs, me, mb) < 0 || set_init(&self->inits, me, mb) < 0) return -1;
    Py_XSETREF(self->keep, PyList_New(0));
    if (!self->keep) return -1;
    if (load_prefixes(facts, self->facts, &self->nfacts, self->keep) < 0) return -1;
    if (load_prefixes(volatiles, self->volatiles, &self->nvolatiles, self->keep) < 0) return -1;
    self->nown = 0;
    if (own && load_prefixes(own, self->own, &self->nown, self->keep) < 0) return -1;
    self->nnot_edge = 0;
    if (not_edge && load_prefixes(not_edge, self->not_edge, &self->nnot_edge, self->keep) < 0) return -1;
    memset(self->by_first, 0, sizeof self->by_first);
    memset(self->volatile_first, 0, sizeof self->volatile_first);
    for (int i = 0; i < self->nvolatiles; i++) {
        unsigned char c = (unsigned char)self->volatiles[i].s[0];
        for (int b = 0; b < 256; b++)
            if (c == '#' ? (b >= '0' && b <= '9') : b == c) self->volatile_first[b] = 1;
    }
    for (int i = 0; i < self->nfacts; i++) {
        unsigned char c = (unsigned char)self->facts[i].s[0];
        for (int b = 0; b < 256; b++)
            if (c == '#' ? (b >= '0' && b <= '9') : b == c) self->by_first[b] |= 1ULL << i;
    }
    return 0;
}

static void Messages_dealloc(Messages *self) {
    ranks_free(&self->ranks);
    set_free(&self->msgs);
    set_free(&self->inits);
    PyMem_Free(self->scratch);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int append_steal(PyObject *list, PyObject *item) {
    if (!item) return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static int bounds(Py_buffer *v, Py_ssize_t first, Py_ssize_t last) {
    if (first < 0 || last < first || last >= v->len) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= first <= last < len(buf)");
        return -1;
    }
    return 0;
}

/* Strings(max_entries, max_bytes): a set of byte strings; known.Known keeps the windows its regex
 * matched in one, so that scan hands back only the runs of lines whose window it has not matched. */
typedef struct {
    PyObject_HEAD
    Set set;
} Strings;

/* The lines' windows (first `width` bytes): consecutive lines that share one are a run; runs (start, end)
 * whose window is not in `good` are handed back, and the starts of lines too near the buffer's end to have
 * a window (tail). known.unknown_from_runs tests their windows. */
typedef struct {
    const char *b;
    Py_ssize_t len, width, prev, start;
    int bad, ended;
    Set *good;
    PyObject *runs, *tail;
} Win;

/* memcmp(a, b, n) == 0, without a call for the 8 to 16 bytes of a host's window */
static int same(const char *a, const char *b, size_t n) {
    if (n < 8 || n > 16) return memcmp(a, b, n) == 0;
    return load8(a) == load8(b) && load8(a + n - 8) == load8(b + n - 8);
}

static int win_close(Win *w, Py_ssize_t end) {
    int rc = 0;
    if (w->prev >= 0 && w->bad && !w->ended) rc = append_steal(w->runs, Py_BuildValue("(nn)", w->start, end));
    w->ended = 1;
    return rc;
}

static int win_line(Win *w, Py_ssize_t s) {
    if (s + w->width > w->len) {
        if (win_close(w, s) < 0) return -1;
        return append_steal(w->tail, PyLong_FromSsize_t(s));
    }
    if (w->prev < 0 || !same(w->b + w->prev, w->b + s, (size_t)w->width)) {
        if (win_close(w, s) < 0) return -1;
        w->start = s;
        w->ended = 0;
        w->bad = !(w->good && set_has(w->good, w->b + s, (size_t)w->width, hash_bytes(w->b + s, (size_t)w->width)));
    }
    w->prev = s;
    return 0;
}

static PyTypeObject StringsType;

static int win_start(Win *w, const char *b, Py_ssize_t len, Py_ssize_t width, PyObject *good) {
    *w = (Win){b, len, width, -1, -1, 0, 1, NULL, NULL, NULL};
    if (good != Py_None && !PyObject_TypeCheck(good, &StringsType)) {
        PyErr_SetString(PyExc_TypeError, "good: a Strings or None");
        return -1;
    }
    w->good = good == Py_None ? NULL : &((Strings *)good)->set;
    w->runs = PyList_New(0), w->tail = PyList_New(0);
    return w->runs && w->tail ? 0 : -1;
}

static void win_free(Win *w) {
    Py_XDECREF(w->runs);
    Py_XDECREF(w->tail);
}

/* Whether buf[lo:hi] is all ASCII, with no ESC, CR or NUL (the line path cleans those, the fast path
 * cannot): 16 bytes at a time with GCC's vector extensions, which compile to SSE2 or NEON. */
#if defined(__GNUC__)
typedef unsigned char v16 __attribute__((vector_size(16)));
#endif

#define BAD(v) ((v16)(((v) >= 0x80) | ((v) == 0x1b) | ((v) == '\r') | ((v) == 0)))

static int plain_bytes(const unsigned char *p, size_t n) {
    size_t i = 0;
#if defined(__GNUC__)
    if (n >= 16) { /* whole blocks, then the last 16 bytes (overlapping): no byte-by-byte tail */
        v16 bad = {0}, v;
        for (; i + 16 <= n; i += 16) {
            memcpy(&v, p + i, 16);
            bad |= BAD(v);
        }
        memcpy(&v, p + n - 16, 16);
        bad |= BAD(v);
        uint64_t w[2];
        memcpy(w, &bad, 16);
        return !(w[0] | w[1]);
    }
#endif
    for (; i < n; i++)
        if (p[i] >= 0x80 || p[i] == 0x1b || p[i] == '\r' || p[i] == 0) return 0;
    return 1;
}

/* The first newline in [p, end), or end; *bad when a byte before it must be cleaned; *n, the first "NC"
 * before it (or the newline; a first 'N' where not counted), *count how many "NC" there are (INT_MAX: not
 * counted). With SSE2 (every x86-64) one pass looks for all of these, 16 bytes at a time, or 32 with AVX2
 * where the CPU has it (chosen at run time: the build stays portable); elsewhere memchr, plain_bytes and
 * memchr again. */
#if defined(__SSE2__)
#include <emmintrin.h>

/* line_end from p, with *n and *count as far as they came */
static const char *line_rest(const char *p, const char *end, int *bad, const char **n, int *count) {
    const __m128i nl = _mm_set1_epi8('\n'), esc = _mm_set1_epi8(0x1b), cr = _mm_set1_epi8('\r');
    const __m128i zero = _mm_setzero_si128(), capital_n = _mm_set1_epi8('N'), capital_c = _mm_set1_epi8('C');
    for (; end - p >= 17; p += 16) { /* 17: the byte after the block is read too, for "NC" */
        __m128i v = _mm_loadu_si128((const __m128i *)p), after = _mm_loadu_si128((const __m128i *)(p + 1));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
        __m128i ctl = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, esc), _mm_cmpeq_epi8(v, cr)), _mm_cmpeq_epi8(v, zero));
        unsigned b = (unsigned)(_mm_movemask_epi8(v) | _mm_movemask_epi8(ctl)); /* high bit: not ASCII */
        unsigned before = m ? (1u << __builtin_ctz(m)) - 1 : 0xffffu;
        unsigned ns = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(v, capital_n), _mm_cmpeq_epi8(after, capital_c))) & before;
        if (ns) {
            if (!*n) *n = p + __builtin_ctz(ns);
            for (unsigned k = ns; k; k &= k - 1) ++*count; /* mostly 0 or 1 bits: no popcnt call */
        }
        if (b & before) *bad = 1;
        if (m) {
            p += __builtin_ctz(m);
            if (!*n) *n = p;
            return p;
        }
    }
    for (; p < end && *p != '\n'; p++) {
        if (!plain_bytes((const unsigned char *)p, 1)) *bad = 1;
        if (*p == 'N' && end - p >= 2 && p[1] == 'C') {
            if (!*n) *n = p;
            ++*count;
        }
    }
    if (!*n) *n = p;
    return p;
}

static const char *line_end_sse2(const char *p, const char *end, int *bad, const char **n, int *count) {
    *n = NULL;
    *count = 0;
    return line_rest(p, end, bad, n, count);
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(SCAN_NO_AVX2) /* -DSCAN_NO_AVX2: the SSE2 pass alone (a test) */
#include <immintrin.h>
#define AVX2_LINES 1

/* line_end_sse2, 32 bytes a step: a line of ~100 bytes is 3 steps, not 6 */
__attribute__((target("avx2"))) static const char *line_end_avx2(const char *p, const char *end, int *bad,
                                                                 const char **n, int *count) {
    const __m256i nl = _mm256_set1_epi8('\n'), esc = _mm256_set1_epi8(0x1b), cr = _mm256_set1_epi8('\r');
    const __m256i zero = _mm256_setzero_si256(), capital_n = _mm256_set1_epi8('N'), capital_c = _mm256_set1_epi8('C');
    *n = NULL;
    *count = 0;
    for (; end - p >= 33; p += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)p), after = _mm256_loadu_si256((const __m256i *)(p + 1));
        uint32_t m = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, nl));
        __m256i ctl = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, esc), _mm256_cmpeq_epi8(v, cr)),
                                      _mm256_cmpeq_epi8(v, zero));
        uint32_t b = (uint32_t)_mm256_movemask_epi8(_mm256_or_si256(v, ctl)); /* high bit: not ASCII, or a control */
        uint32_t before = m ? (m & (0u - m)) - 1 : UINT32_MAX;
        uint32_t ns = (uint32_t)_mm256_movemask_epi8(
            _mm256_and_si256(_mm256_cmpeq_epi8(v, capital_n), _mm256_cmpeq_epi8(after, capital_c))) & before;
        if (ns) {
            if (!*n) *n = p + __builtin_ctz(ns);
            for (uint32_t k = ns; k; k &= k - 1) ++*count;
        }
        if (b & before) *bad = 1;
        if (m) {
            p += __builtin_ctz(m);
            if (!*n) *n = p;
            return p;
        }
    }
    return line_rest(p, end, bad, n, count);
}
#endif

typedef const char *(*LineEnd)(const char *, const char *, int *, const char **, int *);
static LineEnd line_end = line_end_sse2; /* PyInit__scan picks line_end_avx2 where the CPU has AVX2 */
static const char *lines_kind = "sse2";    /* the module's LINES: which line_end it runs */
#else
static const char *lines_kind = "memchr";
static const char *line_end(const char *p, const char *end, int *bad, const char **n, int *count) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) nl = end;
    if (!plain_bytes((const unsigned char *)p, (size_t)(nl - p))) *bad = 1;
    *n = memchr(p, 'N', (size_t)(nl - p));
    if (!*n) *n = nl;
    *count = INT_MAX;
    return nl;
}
#endif

static int letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

/* the first k[0:n] in [s, e), or NULL */
static const char *holds_at(const char *s, const char *e, const char *k, size_t n) {
    for (const char *p = s; (size_t)(e - p) >= n && (p = memchr(p, k[0], (size_t)(e - p) - n + 1)) != NULL; p++)
        if (memcmp(p, k, n) == 0) return p;
    return NULL;
}

static int holds(const char *s, const char *e, const char *k, size_t n) { return holds_at(s, e, k, n) != NULL; }

/* prefixes._OWN_LINE.match: "step 1", "Iter #2", "loss=", "Epoch ", "$ ", "===" */
static int own_shape(const char *s, const char *e) {
    size_t n = (size_t)(e - s);
    if (n >= 2 && (s[0] == '$' || s[0] == '>') && s[1] == ' ') return 1;
    if (n >= 3 && (s[0] == '=' || s[0] == '*' || s[0] == '-') && s[1] == s[0] && s[2] == s[0]) return 1;
    const char *p = s;
    while (p < e && letter(*p)) p++;
    if (p > s && p < e && *p == ' ') { /* [A-Za-z]+ #?\d */
        const char *q = p + 1;
        if (q < e && *q == '#') q++;
        if (q < e && *q >= '0' && *q <= '9') return 1;
    }
    if (p - s >= 2 && p < e && (*p == ':' || *p == '=')) return 1; /* [A-Za-z]{2,}[:=] */
    if (n >= 3 && s[0] >= 'A' && s[0] <= 'Z') { /* [A-Z][a-z]+ and a blank */
        for (p = s + 1; p < e && *p >= 'a' && *p <= 'z'; p++) {}
        if (p > s + 1 && p < e && *p == ' ') return 1;
    }
    return 0;
}

static int word(char c) { return letter(c) || (c >= '0' && c <= '9') || c == '_'; }
static int blank(char c) { return c == ' ' || c == '\t'; }

/* printable ASCII or tabs only: the line path's decode leaves such a line as it is, and \s is a blank in it */
static int printable(const char *s, const char *e) {
    for (const char *p = s; p < e; p++)
        if (*p != '\t' && (*p < 0x20 || *p > 0x7e)) return 0;
    return 1;
}

static int lit(const char **p, const char *e, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(e - *p) < n || memcmp(*p, w, n) != 0) return 0;
    *p += n;
    return 1;
}

static int digits(const char **p, const char *e) {
    const char *s = *p;
    while (*p < e && **p >= '0' && **p <= '9') ++*p;
    return *p > s;
}

/* (?:/(?:a|b))* then the end */
static int only_suffixes(const char *p, const char *e, const char *a, const char *b) {
    while (lit(&p, e, a) || lit(&p, e, b)) {}
    return p == e;
}

/* prefixes._WHOLE_TRANSPORT.fullmatch(p[0:e-p]): a transport named whole, as NCCL prints it */
static int whole_transport(const char *s, const char *e) {
    const char *p = s, *q;
    if (lit(&p, e, "P2P/")) {
        static const char *const kinds[] = {"IPC", "CUMEM", "MNNVL", "direct pointer", "direct"};
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
            if ((q = p, lit(&q, e, kinds[i])) && only_suffixes(q, e, "/read", "/CE")) return 1;
        q = p;
        return lit(&q, e, "indirect/") && digits(&q, e) && lit(&q, e, "[") && digits(&q, e) && lit(&q, e, "]")
               && only_suffixes(q, e, "/read", "/CE");
    }
    if (lit(&p, e, "SHM")) return only_suffixes(p, e, "/direct", "/CE");
    p = s;
    if (lit(&p, e, "direct shared memory") || lit(&p, e, "NVLS")) return p == e;
    if (!lit(&p, e, "NET/") && !lit(&p, e, "COLLNET/")) return 0;
    if (p == e || !letter(*p)) return 0;
    while (p < e && (word(*p) || *p == ' ')) p++;
    if (!lit(&p, e, "/") || !digits(&p, e)) return 0;
    q = p;
    if (lit(&q, e, "(") && digits(&q, e) && lit(&q, e, ")")) p = q;
    lit(&p, e, "/GDRDMA");
    lit(&p, e, "(PCI)");
    lit(&p, e, "/Shared");
    return p == e;
}

/* Whether prefixes.continues(prev, cur, before) is False for every `before`, where prev [ps, pe) is printable
 * and holds no "<std" (the line path reads it whole), by its last rules: after "via" and a whole transport,
 * only a rest that starts with '/' or '(' extends it; with no "via" and no edge cut (" : "), only a rest that
 * starts with a blank. 0: not known here. */
static int ends_whole(const char *ps, const char *pe, const char *s, const char *e) {
    for (const char *v = ps; (v = holds_at(v, pe, "via", 3)) != NULL; v += 3) { /* _VIA.search */
        if ((v > ps && word(v[-1])) || v + 3 == pe || !blank(v[3])) continue;
        const char *a = v + 3, *z = pe;
        while (a < pe && blank(*a)) a++;
        if (a - (v + 3) < 2 && a == pe) continue; /* one blank, then the end: no match here */
        if (a == pe) return 0;                    /* only blanks: a blank of them is the transport */
        while (blank(z[-1])) z--;
        return whole_transport(a, z) && s < e && *s != '/' && *s != '(';
    }
    return !holds(ps, pe, " : ", 3) && s < e && !blank(*s);
}

/* A line that starts with prefixes.HOST up to its first ':' (and, plain_line checked, ":pid:tid [dev] NCCL
 * INFO|WARN" and a blank after it) is one prefixes.NCCL_PREFIX matches at its start: never the rest of another. */
static int host_first(const char *s, const char *e) {
    if (s == e || !(alnum(*s) || *s == '_' || *s == '*')) return 0;
    const char *p = s;
    while (p < e && *p != ':' && host_char(*p)) p++;
    return p < e && *p == ':';
}

/* what the line before a line is: a print, a plain NCCL line (plain_line: then one that starts with its host,
 * host_first, is never the rest of another), or anything else */
enum { OTHER, PLAIN, PRINT };

/* Whether the line [s, e), which holds no "NCCL " tag, is a print the line path reads alone: printable, no
 * launcher tag to cut at ("<std"), and neither continued by the next line (it holds no "NCCL ") nor the rest
 * of the line before it, `prev` [ps, pe): a print (no "NCCL " either), or a plain line (never a rest itself)
 * shorter than a terminal (`wrap`) or that ends whole (ends_whole); or a line of its own whatever the line
 * before it (a part of prefixes.own_line: blank, "#", "[" or "NCCL" first, one of the `own` strings, or
 * _OWN_LINE's shape). */
static int lone_print(const Messages *m, const char *s, const char *e, int prev, const char *ps, const char *pe) {
    if (!printable(s, e) || holds(s, e, "<std", 4)) return 0;
    if (prev == PRINT) return 1;
    const char *p = s;
    while (p < e && blank(*p)) p++;
    if (p == e || *p == '#' || *p == '[' || (e - p >= 4 && memcmp(p, "NCCL", 4) == 0)) return 1;
    for (int i = 0; i < m->nown; i++)
        if (holds(s, e, m->own[i].s, (size_t)m->own[i].n)) return 1;
    if (own_shape(s, e)) return 1;
    if (prev != PLAIN || !host_first(ps, pe)) return 0;
    if (pe - ps < m->wrap) return 1;
    return printable(ps, pe) && !holds(ps, pe, "<std", 4) && ends_whole(ps, pe, s, e);
}

/* [p, e) starts with w: then past it */
static int take(const char **p, const char *e, const char *w) { return lit(p, e, w); }

/* digits, then optionally "[...]" (no ']' inside): EDGE's "(\d+)(?:\[[^\]]*\])?"; the digits' end in *d */
static int rank_at(const char **p, const char *e, const char **d) {
    if (!digits(p, e)) return 0;
    *d = *p;
    if (*p < e && **p == '[') {
        const char *c = memchr(*p, ']', (size_t)(e - *p));
        if (c) *p = c + 1; /* else the group is not taken, and what follows cannot match: the caller declines */
    }
    return 1;
}

static PyObject *str_of(const char *a, const char *z) { return PyUnicode_DecodeASCII(a, z - a, NULL); }

/* A bare plain INFO line (its host first, ":pid:tid [dev] NCCL INFO" and a blank, printable, one NCCL tag, no
 * launcher tag), prefixes.clean_plain's host and message (its end's blanks cut), whose message nccl.EDGE
 * matches at its start, cut into EDGE's groups (b0 and d0 NULL where absent). Taken greedily, as the regex
 * tries them first: where that does not match to the end, the regex would not either, or would match later
 * in the message (EDGE.search): 0, and the caller reads the line as any other. tests/test_logs_scan.py holds
 * it to the regexes. */
typedef struct {
    const char *host_end, *m, *z, *c0, *c1, *a0, *a1, *b0, *b1, *d0, *d1, *r0;
} Cut;

static int edge_cut(const char *s, const char *e, Cut *c) {
    const char *p;
    if (!printable(s, e) || holds(s, e, "<std", 4) || !host_first(s, e)) return 0;
    c->host_end = memchr(s, ':', (size_t)(e - s));
    p = c->host_end + 1;
    if (!digits(&p, e) || !take(&p, e, ":") || !digits(&p, e) || !take(&p, e, " [") || !digits(&p, e)
        || !take(&p, e, "] NCCL INFO") || p == e || !blank(*p))
        return 0;
    const char *m = ++p, *z = e;
    if (holds(m, e, "NCCL ", 5)) return 0; /* a second tag: the fast path hands such a line on as odd */
    while (z > m && blank(z[-1])) z--;
    c->m = m, c->z = z, c->b0 = c->b1 = c->d0 = c->d1 = NULL;
    if (!take(&p, z, "Channel ") && !take(&p, z, "Ring ")) return 0;
    c->c0 = p;
    if (!digits(&p, z)) return 0;
    c->c1 = p;
    const char *q = p;
    if (take(&q, z, "/") && digits(&q, z)) p = q;
    if (!take(&p, z, " : ")) return 0;
    c->a0 = p;
    if (!rank_at(&p, z, &c->a1)) return 0;
    q = p;
    if (take(&q, z, " -> ") && (c->b0 = q, rank_at(&q, z, &c->b1)))
        p = q;
    else
        c->b0 = NULL;
    q = p;
    if (take(&q, z, " [") && ((c->d0 = q, take(&q, z, "send")) || (q = c->d0, take(&q, z, "receive")))
        && (c->d1 = q, take(&q, z, "]")))
        p = q;
    else
        c->d0 = NULL;
    if (p == z || !blank(*p)) return 0;
    while (p < z && blank(*p)) p++;
    if (!take(&p, z, "via") || p == z || !blank(*p)) return 0;
    while (p < z && blank(*p)) p++;
    if (p == z) return 0; /* only blanks after "via": the regex takes one of them for the transport */
    c->r0 = p;
    return 1;
}

/* a tuple of n new references, or NULL (each reference released) where one of them is NULL */
static PyObject *tuple_steal(PyObject **items, int n) {
    PyObject *out = NULL;
    for (int i = 0; i < n; i++)
        if (!items[i]) goto fail;
    if (!(out = PyTuple_New(n))) goto fail;
    for (int i = 0; i < n; i++) PyTuple_SET_ITEM(out, i, items[i]);
    return out;
fail:
    for (int i = 0; i < n; i++) Py_XDECREF(items[i]);
    return NULL;
}

/* edge(line) -> (host, message, channel, src, dst, direction, raw) or None: edge_cut's groups as str */
static PyObject *edge(PyObject *Py_UNUSED(mod), PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "edge: bytes");
        return NULL;
    }
    const char *s = PyBytes_AS_STRING(arg), *e = s + PyBytes_GET_SIZE(arg);
    Cut c;
    if (!edge_cut(s, e, &c)) Py_RETURN_NONE;
    PyObject *items[7] = {str_of(s, c.host_end), str_of(c.m, c.z), str_of(c.c0, c.c1), str_of(c.a0, c.a1),
                          c.b0 ? str_of(c.b0, c.b1) : Py_NewRef(Py_None), c.d0 ? str_of(c.d0, c.d1) : Py_NewRef(Py_None),
                          str_of(c.r0, c.z)};
    return tuple_steal(items, 7);
}

/* the int of the digits [a, z), at most 18 of them (else -1: the caller reads the line as any other) */
static long long small_int(const char *a, const char *z) {
    if (z - a > 18) return -1;
    long long v = 0;
    for (; a < z; a++) v = 10 * v + (*a - '0');
    return v;
}

/* scan's edge of the line [s, e), bare and plain, whose new message (after its tag) is one for nccl.read_edges:
 * edge_cut's, with none of the `not_edge` strings in it, and numbers of at most 18 digits. 1: appended to
 * `edges` as (start, host, message, channel, src, dst, direction, raw), ints for the numbers; 0: not such an
 * edge; -1: an error. */
static int scan_edge(const Messages *self, const char *b, Py_ssize_t s, Py_ssize_t e, PyObject *edges) {
    Cut c;
    if (!edge_cut(b + s, b + e, &c)) return 0;
    for (int i = 0; i < self->nnot_edge; i++)
        if (holds(c.m, c.z, self->not_edge[i].s, (size_t)self->not_edge[i].n)) return 0;
    long long ch = small_int(c.c0, c.c1), a = small_int(c.a0, c.a1), d = c.b0 ? small_int(c.b0, c.b1) : 0;
    if (ch < 0 || a < 0 || d < 0) return 0;
    PyObject *items[8] = {PyLong_FromSsize_t(s), str_of(b + s, c.host_end), str_of(c.m, c.z), PyLong_FromLongLong(ch),
                          PyLong_FromLongLong(a), c.b0 ? PyLong_FromLongLong(d) : Py_NewRef(Py_None),
                          c.d0 ? str_of(c.d0, c.d1) : Py_NewRef(Py_None), str_of(c.r0, c.z)};
    return append_steal(edges, tuple_steal(items, 8)) < 0 ? -1 : 1;
}

static PyObject *Messages_scan(Messages *self, PyObject *args) {
    Py_buffer v;
    Py_ssize_t lo, hi, first, last, width;
    PyObject *good = Py_None;
    int cut_edges = 0;
    if (!PyArg_ParseTuple(args, "y*nnnnn|Op", &v, &lo, &hi, &first, &last, &width, &good, &cut_edges)) return NULL;
    PyObject *found = NULL, *warns = NULL, *odd = NULL, *prints = NULL, *edges = NULL, *out = NULL;
    Win w = {0};
    self->msgs.mark = self->msgs.alen;
    if (bounds(&v, first, last) < 0) goto done;
    if (lo < 0 || lo > first || hi < last || hi > v.len) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= lo <= first <= last <= hi <= len(buf)");
        goto done;
    }
    const char *b = v.buf;
    const unsigned char *u = v.buf;
    if (!plain_bytes(u + lo, (size_t)(first - lo)) || !plain_bytes(u + last, (size_t)(hi - last))) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    found = PyList_New(0), warns = PyList_New(0), odd = PyList_New(0), prints = PyList_New(0), edges = PyList_New(0);
    if (!found || !warns || !odd || !prints || !edges || win_start(&w, b, v.len, width, good) < 0) goto done;
    int prev = OTHER, here = OTHER; /* the line at `first` is read by the line path: not known here */
    Last lastp = {NULL, 0, 0, 0, NULL};
    const char *ps = b, *pe = b;       /* the line before this one */
    for (Py_ssize_t pos = first; pos < last; prev = here, here = OTHER) {
        Py_ssize_t s = pos + 1;
        int bad = 0;
        const char *q;
        int ns;
        Py_ssize_t e = line_end(b + s, b + last, &bad, &q, &ns) - b;
        pos = e;
        const char *ls = ps, *le = pe;
        ps = b + s, pe = b + e;
        if (bad) {
            set_rollback(&self->msgs);
            out = Py_NewRef(Py_None);
            goto done;
        }
        const char *end = b + e, *msg = NULL;
        int kind = 0, tags = 0;
        for (int left = ns; q != NULL && q < end && left > 0 && tags < 2; left--) { /* each "NC" */
            if (end - q >= 5 && memcmp(q + 1, "CCL ", 4) == 0 && ++tags == 1) {
                kind = kind_at(self, q, end);
                msg = q;
            }
            do
                q = left > 1 ? memchr(q + 1, 'N', (size_t)(end - q - 1)) : NULL;
            while (q != NULL && (end - q < 2 || q[1] != 'C'));
        }
        if (width > 0 && tags == 0 && lone_print(self, b + s, end, prev, ls, le)) { /* in no run of windows */
            if (win_close(&w, s) < 0 || append_steal(prints, Py_BuildValue("(nn)", s, e)) < 0) goto done;
            w.prev = -1;
            here = PRINT;
            continue;
        }
        if (width > 0 && win_line(&w, s) < 0) goto done;
        if (tags != 1) { /* no NCCL tag (a bare pre-2.3 line?), or two (a second prefix glued on?) */
            if (append_steal(odd, Py_BuildValue("(nn)", s, e)) < 0) goto done;
            continue;
        }
        int plain = plain_line(&lastp, b + s, msg, end, width > 0);
        if (plain)
            here = PLAIN;
        else if (append_steal(odd, Py_BuildValue("(nn)", s, e)) < 0)
            goto done;
        if (!kind) continue;
        q = msg;
        size_t n = (size_t)(end - q);
        int seen;
        if (kind == 1 && self->volatile_first[(unsigned char)q[10]]
            && any_start(q + 10, end - q - 10, self->volatiles, self->nvolatiles)) {
            Py_ssize_t k = masked(self, q, n);
            seen = k < 0 ? -1 : init_seen_by(&self->inits, line_rank(self, &lastp, plain && width > 0, b + s, msg),
                                             self->scratch, (size_t)k);
        } else {
            seen = seen_or_add_by(&self->msgs, line_rank(self, &lastp, plain && width > 0, b + s, msg), q, n);
        }
        if (seen < 0) {
            PyErr_NoMemory();
            goto done;
        }
        if (kind == 2 && append_steal(warns, PyBytes_FromStringAndSize(q, (Py_ssize_t)n)) < 0) goto done;
        if (seen) continue;
        int cut = cut_edges && width > 0 && plain && kind == 1 ? scan_edge(self, b, s, e, edges) : 0;
        if (cut < 0 || (!cut && append_steal(found, Py_BuildValue("(y#nn)", q, (Py_ssize_t)n, s, e)) < 0)) goto done;
    }
    if (width > 0 && win_close(&w, last + 1) < 0) goto done;
    out = cut_edges ? PyTuple_Pack(7, found, warns, w.runs, w.tail, odd, prints, edges)
                    : PyTuple_Pack(6, found, warns, w.runs, w.tail, odd, prints);
done:
    if (!out) set_rollback(&self->msgs);
    Py_XDECREF(found);
    Py_XDECREF(warns);
    Py_XDECREF(odd);
    Py_XDECREF(prints);
    Py_XDECREF(edges);
    win_free(&w);
    PyBuffer_Release(&v);
    return out;
}

/* bytes.count of needle (k bytes) in p[0:n], matches not overlapping; memchr looks for its byte r, a rare
 * one (a space is everywhere) */
static Py_ssize_t count(const char *p, size_t n, const char *needle, size_t k, size_t r) {
    Py_ssize_t c = 0;
    const char *end = p + n, *from = p, *s = p + r, *q; /* from: where the next match may start */
    while (s < end && (q = memchr(s, needle[r], (size_t)(end - s))) != NULL) {
        const char *m = q - r;
        if (m >= from && (size_t)(end - m) >= k && memcmp(m, needle, k) == 0) {
            c++;
            from = m + k;
            s = from + r;
        } else {
            s = q + 1;
        }
    }
    return c;
}

/* fastpath.nccl_dominated, the same samples and counts */
static PyObject *dominated(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer v;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "y*nn", &v, &lo, &hi)) return NULL;
    PyObject *out = NULL;
    if (lo < 0 || hi < lo || hi > v.len) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= lo <= hi <= len(buf)");
    } else {
        const char *b = v.buf;
        Py_ssize_t step = (hi - lo) / 16 > 1 ? (hi - lo) / 16 : 1, lines = 0, nccl = 0;
        for (Py_ssize_t i = lo; i < hi; i += step) {
            Py_ssize_t e = i + 4096 < hi ? i + 4096 : hi;
            lines += count(b + i, (size_t)(e - i), "\n", 1, 0);
            nccl += count(b + i, (size_t)(e - i), " NCCL ", 6, 4); /* its L: a line has one, and 3 N */
        }
        out = PyBool_FromLong(lines > 0 && 4 * nccl >= 3 * lines);
    }
    PyBuffer_Release(&v);
    return out;
}

/* heads(buf, lo, hi) -> [start]: of the lines after each newline of buf[lo:hi], the starts of those whose head
 * (the bytes before the first ':', at most HEAD_MAX) no line before them there has: where a host's first line
 * can be, for known.newcomers, which reads only these (a 1024-rank job's 2 MiB chunk: ~300 of 20,000 lines). A
 * host whose line's head an earlier line had (a host after a time stamp or a launcher tag, a print such as
 * "node1: ...", a head longer than HEAD_MAX) is learned where its lines show up unknown (fastpath._bounds). */
#define HEAD_MAX 64
static PyObject *heads(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer v;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "y*nn", &v, &lo, &hi)) return NULL;
    PyObject *out = NULL;
    Set seen = {0};
    seen.last = NONE;
    if (lo < 0 || hi < lo || hi > v.len) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= lo <= hi <= len(buf)");
        goto done;
    }
    if (set_init(&seen, PY_SSIZE_T_MAX, UINT32_MAX) < 0 || !(out = PyList_New(0))) goto done;
    const char *b = v.buf, *end = b + hi;
    int empty = 0; /* a line with an empty head was listed (the set holds no empty string) */
    for (const char *p = memchr(b + lo, '\n', (size_t)(hi - lo)); p; p = memchr(p + 1, '\n', (size_t)(end - p - 1))) {
        const char *s = p + 1, *lim = end - s > HEAD_MAX ? s + HEAD_MAX : end, *h = s;
        while (h < lim && *h != ':' && *h != '\n') h++;
        int known = h == s ? empty++ > 0 : set_seen_or_add(&seen, s, (size_t)(h - s));
        if (known < 0) {
            PyErr_NoMemory();
            Py_CLEAR(out);
            goto done;
        }
        if (!known && append_steal(out, PyLong_FromSsize_t(s - b)) < 0) {
            Py_CLEAR(out);
            goto done;
        }
        if (p + 1 >= end) break;
    }
done:
    set_free(&seen);
    PyBuffer_Release(&v);
    return out;
}

static Py_ssize_t Messages_len(Messages *self) { return (Py_ssize_t)(self->msgs.used + self->inits.used); }

static PyObject *Messages_rollback(Messages *self, PyObject *Py_UNUSED(ignored)) {
    set_rollback(&self->msgs);
    Py_RETURN_NONE;
}

static PyObject *Messages_forget(Messages *self, PyObject *b) {
    if (!PyBytes_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "forget: bytes");
        return NULL;
    }
    set_forget(&self->msgs, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    Py_RETURN_NONE;
}

static PyObject *Messages_add_inits(Messages *self, PyObject *seq) {
    PyObject *fast = PySequence_Fast(seq, "add_inits: a sequence of bytes");
    if (!fast) return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        PyObject *b = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) == 0) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "add_inits: non-empty bytes");
            return NULL;
        }
        Py_ssize_t k = masked(self, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        if (k < 0 || set_seen_or_add(&self->inits, self->scratch, (size_t)k) < 0) {
            Py_DECREF(fast);
            return PyErr_NoMemory();
        }
    }
    Py_DECREF(fast);
    Py_RETURN_NONE;
}

static PyMethodDef Messages_methods[] = {
    {"scan", (PyCFunction)Messages_scan, METH_VARARGS,
     "scan(buf, lo, hi, first, last, width, good=None, cut_edges=False) -> (found, warns, runs, tail, odd, prints), "
     "and edges with cut_edges, or None when "
     "buf[lo:hi] holds a byte the line path must clean (non-ASCII, ESC, CR, NUL). Of the lines after "
     "buf[first] up to buf[last]: found, [(message, line start, line end)] of messages not read before (and of "
     "volatile ones unlike the init lines given), in file order; warns, every WARN message; runs, [(start, "
     "end)] of runs of lines that share their first `width` bytes, a window not in `good` (a Strings); tail, "
     "starts of lines too near the buffer's end to have a window (no runs and no tail when width is 0); odd, "
     "[(start, end)] of lines with no 'NCCL ' tag or more than one (their messages are not looked at), or "
     "whose prefix is not plain (known.TAIL; with a width, no ':' before ':pid'); prints (with a width only), "
     "[(start, end)] of lines with no 'NCCL ' tag that the line path reads alone (own_print), in no run or tail "
     "and not in odd; edges (with a width and cut_edges), [(start, host, message, channel, src, dst, direction, "
     "raw)] of the new messages, not in found, that are edges of a plain line that starts with its host "
     "(edge(line)'s groups, the numbers as ints), whose message holds none of not_edge"},
    {"rollback", (PyCFunction)Messages_rollback, METH_NOARGS,
     "forget the messages the last scan added (its span went to the line path after all)"},
    {"forget", (PyCFunction)Messages_forget, METH_O,
     "forget(message): a message scan kept, read after all only with another line glued on (a later copy is "
     "new again)"},
    {"add_inits", (PyCFunction)Messages_add_inits, METH_O,
     "add_inits(messages): init lines read, which scan hands back no more, nor any that differs from one of "
     "them only in the digits of its 0x numbers (its comm pointer and id: the rank and nranks are the same)"},
    {NULL}};

static PySequenceMethods Messages_seq = {.sq_length = (lenfunc)Messages_len};

static PyTypeObject MessagesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hpcbench.parse._scan.Messages",
    .tp_basicsize = sizeof(Messages),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Messages(facts, volatiles, max_entries, max_bytes, own=(), wrap=0, not_edge=()): the fast path's set "
              "of messages read, and its pass over a span. facts and volatiles: message starts, as bytes ('#' is a "
              "digit); own: strings that make a line one of its own (prefixes.NOT_CONTINUATIONS); not_edge: strings "
              "that keep an edge's message from scan's edges (nccl.NcclState.NOT_EDGE).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Messages_init,
    .tp_dealloc = (destructor)Messages_dealloc,
    .tp_methods = Messages_methods,
    .tp_as_sequence = &Messages_seq,
};

static int Strings_init(Strings *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"max_entries", "max_bytes", NULL};
    Py_ssize_t me, mb;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "nn", names, &me, &mb)) return -1;
    return set_init(&self->set, me, mb);
}

static void Strings_dealloc(Strings *self) {
    set_free(&self->set);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Strings_contains(Strings *self, PyObject *b) {
    if (!PyBytes_Check(b)) return 0;
    const char *p = PyBytes_AS_STRING(b);
    size_t n = (size_t)PyBytes_GET_SIZE(b);
    return n > 0 && set_has(&self->set, p, n, hash_bytes(p, n));
}

static PyObject *Strings_add(Strings *self, PyObject *b) {
    if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) == 0) {
        PyErr_SetString(PyExc_TypeError, "add: non-empty bytes");
        return NULL;
    }
    if (set_seen_or_add(&self->set, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b)) < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *Strings_clear(Strings *self, PyObject *Py_UNUSED(ignored)) {
    set_clear(&self->set);
    Py_RETURN_NONE;
}

static Py_ssize_t Strings_len(Strings *self) { return (Py_ssize_t)self->set.used; }

static PyMethodDef Strings_methods[] = {
    {"add", (PyCFunction)Strings_add, METH_O, "add(bytes)"},
    {"clear", (PyCFunction)Strings_clear, METH_NOARGS, "forget every string"},
    {NULL}};

static PySequenceMethods Strings_seq = {.sq_length = (lenfunc)Strings_len, .sq_contains = (objobjproc)Strings_contains};

static PyTypeObject StringsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hpcbench.parse._scan.Strings",
    .tp_basicsize = sizeof(Strings),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Strings(max_entries, max_bytes): a set of byte strings (add, in, len, clear); past its bounds "
              "it starts again.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Strings_init,
    .tp_dealloc = (destructor)Strings_dealloc,
    .tp_methods = Strings_methods,
    .tp_as_sequence = &Strings_seq,
};

static PyMethodDef module_methods[] = {
    {"dominated", dominated, METH_VARARGS, "dominated(buf, lo, hi) -> fastpath.nccl_dominated's answer"},
    {"heads", heads, METH_VARARGS, "heads(buf, lo, hi) -> starts of the lines after a newline of buf[lo:hi] whose "
     "bytes before their first ':' (at most 64) no line before them there has"},
    {"edge", edge, METH_O, "edge(line) -> (host, message, channel, src, dst, direction, raw) of a bare plain "
     "INFO line whose message nccl.EDGE matches at its start, or None"},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__scan(void) {
#ifdef AVX2_LINES
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) line_end = line_end_avx2, lines_kind = "avx2";
#endif
    if (PyType_Ready(&MessagesType) < 0 || PyType_Ready(&StringsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&MessagesType);
    Py_INCREF(&StringsType);
    if (PyModule_AddObject(m, "Messages", (PyObject *)&MessagesType) < 0 ||
        PyModule_AddObject(m, "Strings", (PyObject *)&StringsType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", ABI) < 0 ||
        PyModule_AddStringConstant(m, "LINES", lines_kind) < 0) {
        Py_DECREF(&MessagesType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
