/* SPDX-License-Identifier: MIT */
/*
 * Compiled Java code read from a HotSpot JVM's code cache; see hotspot.h.
 * Every value read from the JVM is checked before it is used: the JVM
 * changes its code cache while it is read, and a blob that does not hold
 * together gives no answer.
 */
#include "hotspot-internal.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_HEAPS          8
#define HEAPS_REREAD_NS    100000000ULL /* a miss reads the heaps again at most this often */
#define SEGMAP_CHUNK       256          /* segment map bytes read at once */
#define SEGMAP_MAX_STEPS   4096
#define SEGMENT_FREE       0xff
#define BLOB_READ_MAX      1024          /* HeapBlock and nmethod, at most */
#define NAMES_KNOWN        32            /* blob name pointers remembered */
#define MAX_PCDESCS        65536         /* of one nmethod */
#define MAX_SCOPES_BYTES   (1u << 20)    /* of one nmethod */
#define MAX_METADATA       65536         /* of one nmethod */
#define PROLOGUE_MAX_BYTES 64            /* read from the verified entry */
#define CODE_RETRY_NS      1000000000ULL /* heaps not readable yet: tried again after */

struct heap {
        uint64_t low, high, segmap;
        unsigned log2_segment;
};

enum blob_kind { BLOB_NMETHOD, BLOB_NATIVE, BLOB_OTHER };

struct blob {
        uint64_t start, end; /* [the blob, its code's end): what a pc finds it by */
        uint64_t code_begin, verified_entry, complete, stubs;
        uint64_t name_p, method;
        const char *name; /* its name as kind_of() keeps it (while h lives) */
        int32_t compile_id;
        /* An nmethod's metadata, PcDescs and their end (from the blob), its scopes data. */
        int32_t metadata_off, pcs_off, deps_off;
        uint64_t scopes_data;
        uint32_t frame_bytes;
        enum blob_kind kind;
        uint64_t checked_ns;
        /* Its scopes, read at the first lookup: (pc offset, scope offset) pairs. */
        bool scopes_read;
        int32_t *pcs;
        uint32_t n_pcs, n_scopes, n_metadata;
        uint8_t *scopes;
        uint64_t *metadata;
};

struct known_name {
        uint64_t p;
        enum blob_kind kind;
        char name[48];
};

struct fp_hotspot_code_cache {
        struct heap heaps[MAX_HEAPS];
        size_t n_heaps;
        uint64_t heaps_read_ns;
        struct blob *blobs; /* sorted by start, not overlapping */
        size_t n_blobs, cap_blobs;
        size_t bytes; /* of the blobs' scopes */
        struct known_name names[NAMES_KNOWN];
        size_t n_names;
        struct fp_hotspot_code_stats st;
};

static bool has(const struct fp_hotspot *h, int f)
{
        return h->found & (1ull << f);
}

static bool peek_i32(const struct fp_hotspot *h, uint64_t addr, int32_t *ret)
{
        return fp_hotspot_peek(h->pid, addr, ret, sizeof(*ret));
}

/* A field of width w at off in buf (n bytes read); false when beyond. */
static bool field(const uint8_t *buf, size_t n, uint64_t off, void *out, size_t w)
{
        if (off > n || n - off < w)
                return false;
        memcpy(out, buf + off, w);
        return true;
}

static int read_heaps(struct fp_hotspot *h, struct fp_hotspot_code_cache *c)
{
        uint64_t array, data;
        int32_t len;

        c->heaps_read_ns = fp_now_ns(CLOCK_MONOTONIC);
        if (!fp_hotspot_peek_u64(h->pid, h->off[F_CODE_HEAPS], &array) || !array ||
            !peek_i32(h, array + h->off[F_ARRAY_LEN], &len) ||
            !fp_hotspot_peek_u64(h->pid, array + h->off[F_ARRAY_DATA], &data) || len <= 0 ||
            len > 64)
                return errno == ESRCH ? -ESRCH : -EIO;
        c->n_heaps = 0;
        for (int32_t i = 0; i < len && c->n_heaps < MAX_HEAPS; i++) {
                uint64_t heap, mem, seg;
                struct heap x;
                int32_t log2;
                if (!fp_hotspot_peek_u64(h->pid, data + 8 * (uint64_t)i, &heap) || !heap)
                        return -EIO;
                mem = heap + h->off[F_HEAP_MEMORY];
                seg = heap + h->off[F_HEAP_SEGMAP];
                if (!fp_hotspot_peek_u64(h->pid, mem + h->off[F_SPACE_LOW], &x.low) ||
                    !fp_hotspot_peek_u64(h->pid, mem + h->off[F_SPACE_HIGH], &x.high) ||
                    !fp_hotspot_peek_u64(h->pid, seg + h->off[F_SPACE_LOW], &x.segmap) ||
                    !peek_i32(h, heap + h->off[F_HEAP_LOG2_SEGMENT], &log2))
                        return -EIO;
                if (log2 < 4 || log2 > 20 || x.high < x.low || !x.segmap)
                        return -EIO;
                x.log2_segment = (unsigned)log2;
                c->heaps[c->n_heaps++] = x;
        }
        return 0;
}

/* Whether h has all it needs to read the code cache; its reason when not. */
static bool code_fields(const struct fp_hotspot *h, char *why, size_t len)
{
        for (int f = N_NAME_FIELDS; f < N_FIELDS; f++)
                if (!has(h, f)) {
                        snprintf(why, len,
                                 "the JVM's VMStructs give no %s field: compiled code "
                                 "is named from its perf map",
                                 f == F_CODE_HEAPS ? "CodeCache::_heaps" : "code cache");
                        return false;
                }
        if (!h->size[T_HEAP_BLOCK] || h->size[T_HEAP_BLOCK] > 64 || h->size[T_PCDESC] < 8 ||
            h->size[T_PCDESC] > 64 || !h->size[T_NMETHOD] ||
            h->size[T_HEAP_BLOCK] + h->size[T_NMETHOD] > BLOB_READ_MAX) {
                snprintf(why, len, "the JVM's VMTypes give no sizes of its code cache's types");
                return false;
        }
        return true;
}

/*
 * h's code cache, set up at the first call. Fields the JVM does not give
 * are final; heaps that cannot be read yet (a JVM still starting) are
 * tried again CODE_RETRY_NS later.
 */
static struct fp_hotspot_code_cache *cache(struct fp_hotspot *h)
{
        struct fp_hotspot_code_cache *c;
        uint64_t now;
        int r;

        if (h->code)
                return h->code;
        now = fp_now_ns(CLOCK_MONOTONIC);
        if (h->code_tried && (h->code_final || now < h->code_retry_ns))
                return NULL;
        h->code_tried = true;
        h->code_retry_ns = now + CODE_RETRY_NS;
        if (!code_fields(h, h->code_why, sizeof(h->code_why))) {
                h->code_final = true;
                return NULL;
        }
        if (!(c = calloc(1, sizeof(*c)))) {
                snprintf(h->code_why, sizeof(h->code_why), "out of memory");
                return NULL;
        }
        if ((r = read_heaps(h, c)) < 0 || !c->n_heaps) {
                snprintf(h->code_why, sizeof(h->code_why), "cannot read the JVM's code heaps: %s",
                         r < 0 ? strerror(-r) : "none");
                h->code_final = r == -ESRCH;
                free(c);
                return NULL;
        }
        h->code_why[0] = 0;
        h->code = c;
        return c;
}

static void blob_release(struct fp_hotspot_code_cache *c, struct blob *b)
{
        c->bytes -= (size_t)b->n_pcs * 8 + b->n_scopes + (size_t)b->n_metadata * 8;
        free(b->pcs);
        free(b->scopes);
        free(b->metadata);
}

static void drop_all(struct fp_hotspot_code_cache *c)
{
        for (size_t i = 0; i < c->n_blobs; i++)
                blob_release(c, &c->blobs[i]);
        c->n_blobs = 0;
}

void fp_hotspot_code_free(struct fp_hotspot *h)
{
        struct fp_hotspot_code_cache *c = h->code;

        if (!c)
                return;
        drop_all(c);
        free(c->blobs);
        free(c);
        h->code = NULL;
}

/* The index of the first blob whose start is above pc. */
static size_t upper(const struct fp_hotspot_code_cache *c, uint64_t pc)
{
        size_t lo = 0, hi = c->n_blobs;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (c->blobs[mid].start <= pc)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* The start of the heap block holding pc, found through its heap's segment map; 0: none. */
static uint64_t block_of(const struct fp_hotspot *h, const struct heap *x, uint64_t pc)
{
        uint64_t idx = (pc - x->low) >> x->log2_segment;
        uint8_t map[SEGMAP_CHUNK];
        uint64_t first = 1, last = 0; /* the map bytes held: [first, last] */

        for (int steps = 0; steps < SEGMAP_MAX_STEPS; steps++) {
                if (idx < first || idx > last) {
                        first = idx >= SEGMAP_CHUNK - 1 ? idx - (SEGMAP_CHUNK - 1) : 0;
                        last = idx;
                        if (!fp_hotspot_peek(h->pid, x->segmap + first, map, last - first + 1))
                                return 0;
                }
                uint8_t hop = map[idx - first];
                if (hop == SEGMENT_FREE)
                        return 0;
                if (hop == 0)
                        return x->low + (idx << x->log2_segment);
                if (hop > idx)
                        return 0;
                idx -= hop;
        }
        return 0;
}

static enum blob_kind kind_of(struct fp_hotspot *h, struct fp_hotspot_code_cache *c,
                              uint64_t name_p, const char **ret_name)
{
        struct known_name k = {.p = name_p, .kind = BLOB_OTHER};

        for (size_t i = 0; i < c->n_names; i++)
                if (c->names[i].p == name_p) {
                        *ret_name = c->names[i].name;
                        return c->names[i].kind;
                }
        if (!fp_hotspot_peek_cstr(h->pid, name_p, k.name, sizeof(k.name)))
                snprintf(k.name, sizeof(k.name), "[code cache]");
        else if (strcmp(k.name, "nmethod") == 0)
                k.kind = BLOB_NMETHOD;
        else if (strcmp(k.name, "native nmethod") == 0)
                k.kind = BLOB_NATIVE;
        if (c->n_names < NAMES_KNOWN) {
                c->names[c->n_names] = k;
                *ret_name = c->names[c->n_names++].name;
        } else {
                *ret_name = k.kind == BLOB_OTHER ? "[code cache]" : "nmethod";
        }
        return k.kind;
}

/* Reads the blob at block (a heap block's start) into b; false when it does not hold together. */
static bool read_blob(struct fp_hotspot *h, struct fp_hotspot_code_cache *c, uint64_t block,
                      struct blob *b)
{
        uint8_t buf[BLOB_READ_MAX];
        size_t hb = h->size[T_HEAP_BLOCK], n = hb + h->size[T_NMETHOD];
        uint8_t used = 0;
        int32_t complete = 0, frame_words = 0, stub = 0;

        *b = (struct blob){.start = block + hb};
        /* A blob other than an nmethod may end before an nmethod would: read what there is. */
        if (!fp_hotspot_peek(h->pid, block, buf, n)) {
                n = hb + 128;
                if (n > sizeof(buf) || !fp_hotspot_peek(h->pid, block, buf, n))
                        return false;
        }
        if (!field(buf, n, h->off[F_BLOCK_HEADER] + h->off[F_BLOCK_USED], &used, 1) || !used ||
            !field(buf, n, hb + h->off[F_BLOB_NAME], &b->name_p, 8) ||
            !field(buf, n, hb + h->off[F_BLOB_CODE_BEGIN], &b->code_begin, 8) ||
            !field(buf, n, hb + h->off[F_BLOB_CODE_END], &b->end, 8) ||
            !field(buf, n, hb + h->off[F_BLOB_FRAME_COMPLETE], &complete, 4) ||
            !field(buf, n, hb + h->off[F_BLOB_FRAME_SIZE], &frame_words, 4) || !b->name_p ||
            b->code_begin < b->start || b->end <= b->code_begin || b->end - b->start > (256u << 20))
                return false;
        b->kind = kind_of(h, c, b->name_p, &b->name);
        b->complete = complete >= 0 ? b->code_begin + (uint64_t)complete : b->end;
        /* A stub's frame size, when it has one: where it calls out, its frame is whole. */
        if (frame_words >= 2 && frame_words <= (1 << 16))
                b->frame_bytes = (uint32_t)frame_words * 8;
        if (b->kind == BLOB_OTHER)
                return true;
        if (n < hb + h->size[T_NMETHOD] ||
            !field(buf, n, hb + h->off[F_COMPILED_METHOD], &b->method, 8) ||
            !field(buf, n, hb + h->off[F_NMETHOD_COMPILE_ID], &b->compile_id, 4) ||
            !field(buf, n, hb + h->off[F_NMETHOD_VERIFIED_ENTRY], &b->verified_entry, 8) ||
            !field(buf, n, hb + h->off[F_NMETHOD_STUB], &stub, 4) ||
            !field(buf, n, hb + h->off[F_NMETHOD_METADATA], &b->metadata_off, 4) ||
            !field(buf, n, hb + h->off[F_NMETHOD_SCOPES_PCS], &b->pcs_off, 4) ||
            !field(buf, n, hb + h->off[F_NMETHOD_DEPENDENCIES], &b->deps_off, 4) ||
            !field(buf, n, hb + h->off[F_COMPILED_SCOPES_DATA], &b->scopes_data, 8) || !b->method ||
            stub <= 0 || frame_words <= 1 || frame_words > (1 << 16))
                return false;
        b->frame_bytes = (uint32_t)frame_words * 8;
        b->stubs = b->start + (uint64_t)stub;
        if (b->verified_entry < b->code_begin || b->verified_entry >= b->end)
                b->verified_entry = b->code_begin;
        return true;
}

/* Reads what the scopes of nmethod b need: its PcDescs, scopes data and metadata. */
static void read_scopes(struct fp_hotspot *h, struct fp_hotspot_code_cache *c, struct blob *b)
{
        int32_t meta_off = b->metadata_off, pcs_off = b->pcs_off, deps_off = b->deps_off;
        uint64_t scopes = b->scopes_data;
        uint64_t pcdesc = h->size[T_PCDESC];

        b->scopes_read = true;
        uint64_t meta = b->start + (uint64_t)(int64_t)meta_off;
        uint64_t pcs = b->start + (uint64_t)(int64_t)pcs_off;
        uint64_t deps = b->start + (uint64_t)(int64_t)deps_off;
        /* metadata, then scopes data, then the PcDescs, in this order within the blob */
        if (meta_off <= 0 || pcs_off <= 0 || deps_off <= 0 || meta > scopes || scopes > pcs ||
            pcs > deps || (scopes - meta) % 8 || (deps - pcs) % pcdesc ||
            (scopes - meta) / 8 > MAX_METADATA || (deps - pcs) / pcdesc > MAX_PCDESCS ||
            pcs - scopes > MAX_SCOPES_BYTES)
                return;
        size_t n_pcs = (deps - pcs) / pcdesc, n_meta = (scopes - meta) / 8, n_scopes = pcs - scopes;
        uint8_t *raw = malloc(deps - pcs ? deps - pcs : 1);
        b->pcs = malloc(n_pcs * 8 + 1);
        b->scopes = malloc(n_scopes + 1);
        b->metadata = malloc(n_meta * 8 + 1);
        if (!raw || !b->pcs || !b->scopes || !b->metadata ||
            !fp_hotspot_peek(h->pid, pcs, raw, deps - pcs) ||
            !fp_hotspot_peek(h->pid, scopes, b->scopes, n_scopes) ||
            !fp_hotspot_peek(h->pid, meta, b->metadata, n_meta * 8)) {
                free(raw);
                free(b->pcs);
                free(b->scopes);
                free(b->metadata);
                b->pcs = NULL;
                b->scopes = NULL;
                b->metadata = NULL;
                return;
        }
        for (size_t i = 0; i < n_pcs; i++) {
                memcpy(&b->pcs[2 * i], raw + i * pcdesc + h->off[F_PCDESC_PC], 4);
                memcpy(&b->pcs[2 * i + 1], raw + i * pcdesc + h->off[F_PCDESC_SCOPE], 4);
        }
        free(raw);
        b->n_pcs = (uint32_t)n_pcs;
        b->n_scopes = (uint32_t)n_scopes;
        b->n_metadata = (uint32_t)n_meta;
        c->bytes += n_pcs * 8 + n_scopes + n_meta * 8;
}

/*
 * An int of a scopes stream (HotSpot's compressed ints: a byte below 192
 * ends it; each byte counts 64 times the one before, at most five).
 */
static bool read_int(const struct blob *b, uint32_t *pos, uint32_t *ret)
{
        uint32_t sum = 0, shift = 0;

        for (int i = 0; i < 5; i++) {
                if (*pos >= b->n_scopes)
                        return false;
                uint32_t v = b->scopes[(*pos)++];
                sum += v << shift;
                if (v < 192 || i == 4) {
                        *ret = sum;
                        return true;
                }
                shift += 6;
        }
        return false;
}

/*
 * The methods at code offset off of b into out, innermost first: the chain
 * of scopes of the first PcDesc at or after off. Its method alone when b
 * has no scopes there, or when they do not hold together.
 */
static unsigned methods_at(struct fp_hotspot_code_cache *c, const struct blob *b, int64_t off,
                           uint64_t *out)
{
        size_t lo = 0, hi = b->n_pcs;
        unsigned n = 0;

        out[0] = b->method;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (b->pcs[2 * mid] < off)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo >= b->n_pcs || b->pcs[2 * lo + 1] <= 0)
                return 1;
        uint32_t at = (uint32_t)b->pcs[2 * lo + 1];
        while (at && n < FP_HOTSPOT_MAX_INLINE) {
                uint32_t pos = at, sender, index;
                if (!read_int(b, &pos, &sender) || !read_int(b, &pos, &index) || index == 0 ||
                    index > b->n_metadata || !b->metadata[index - 1])
                        break;
                out[n++] = b->metadata[index - 1];
                at = sender;
        }
        /* The outermost scope is the compiled method itself. */
        if (at || n == 0 || out[n - 1] != b->method) {
                c->st.scopes_failed++;
                out[0] = b->method;
                return 1;
        }
        if (n > 1)
                c->st.inlined++;
        return n;
}

/* The length of a multi-byte nop at p (0x66 prefixes, 0f 1f and its operand), or 0. */
static size_t nop_length(const uint8_t *p, size_t n)
{
        size_t i = 0, len;

        while (i < n && p[i] == 0x66)
                i++;
        if (i < n && p[i] == 0x90)
                return i + 1;
        if (i + 2 >= n || p[i] != 0x0f || p[i + 1] != 0x1f)
                return 0;
        uint8_t modrm = p[i + 2], mod = modrm >> 6, rm = modrm & 7;
        len = i + 3 + (mod != 3 && rm == 4 ? 1 : 0);
        len += mod == 1 ? 1 : mod == 2 ? 4 : mod == 0 && rm == 5 ? 4 : 0;
        return len <= n ? len : 0;
}

bool fp_hotspot_prologue(const uint8_t *p, size_t n, size_t upto, struct fp_hotspot_code *r)
{
        size_t at = 0, len;
        int32_t d;

        r->cfa = 8;
        r->rbp_saved = false;
        while (at < upto) {
                const uint8_t *q = p + at;
                size_t left = n - at;
                if (left >= 7 && q[0] == 0x89 && q[1] == 0x84 && q[2] == 0x24) {
                        len = 7; /* mov [rsp+d32],eax: the stack bang */
                } else if (q[0] == 0x55) {
                        r->cfa += 8;
                        r->rbp_saved = true;
                        r->rbp_off = -(int32_t)r->cfa;
                        len = 1;
                } else if (left >= 3 && q[0] == 0x48 &&
                           ((q[1] == 0x8b && q[2] == 0xec) || (q[1] == 0x89 && q[2] == 0xe5))) {
                        len = 3; /* mov rbp,rsp */
                } else if (left >= 4 && q[0] == 0x48 && q[1] == 0x83 && q[2] == 0xec) {
                        r->cfa += q[3];
                        len = 4;
                } else if (left >= 7 && q[0] == 0x48 && q[1] == 0x81 && q[2] == 0xec) {
                        memcpy(&d, q + 3, 4);
                        if (d < 0 || d > (1 << 20))
                                return false;
                        r->cfa += (uint32_t)d;
                        len = 7;
                } else if (left >= 5 && q[0] == 0x48 && q[1] == 0x89 && q[2] == 0x6c &&
                           q[3] == 0x24) {
                        r->rbp_saved = true; /* mov [rsp+d8],rbp */
                        r->rbp_off = (int32_t)q[4] - (int32_t)r->cfa;
                        len = 5;
                } else if (left >= 8 && q[0] == 0x48 && q[1] == 0x89 && q[2] == 0xac &&
                           q[3] == 0x24) {
                        memcpy(&d, q + 4, 4);
                        r->rbp_saved = true;
                        r->rbp_off = d - (int32_t)r->cfa;
                        len = 8;
                } else if (left >= 4 && q[0] == 0x48 && q[1] == 0x83 && q[2] == 0xc5) {
                        len = 4; /* add rbp,imm8 */
                } else if (left >= 7 && q[0] == 0x48 && q[1] == 0x81 && q[2] == 0xc5) {
                        len = 7;
                } else if (!(len = nop_length(q, left))) {
                        return false;
                }
                at += len;
        }
        return at == upto;
}

/*
 * The frame of nmethod b where the thread was (leaf) at pc: its body's
 * frame, or what its prologue or epilogue has built of it so far.
 */
static void leaf_frame(struct fp_hotspot *h, const struct blob *b, uint64_t pc,
                       struct fp_hotspot_code *r)
{
        uint8_t code[PROLOGUE_MAX_BYTES + 16];

        r->frame = FP_HOTSPOT_FRAME_SIZE;
        if (pc >= b->stubs) {
                r->frame = FP_HOTSPOT_FRAME_UNKNOWN; /* its stubs: calls' and handlers' code */
                return;
        }
        if (pc < b->verified_entry) { /* the inline cache's check: nothing pushed yet */
                r->cfa = 8;
                r->rbp_saved = false;
                return;
        }
        if (pc < b->complete) {
                size_t upto = pc - b->verified_entry, n = upto + 16;
                if (upto > PROLOGUE_MAX_BYTES ||
                    !fp_hotspot_peek(h->pid, b->verified_entry, code, n) ||
                    !fp_hotspot_prologue(code, n, upto, r))
                        r->frame = FP_HOTSPOT_FRAME_UNKNOWN;
                return;
        }
        if (!fp_hotspot_peek(h->pid, pc, code, 16))
                return;
        /* The epilogue: add rsp,N; pop rbp; [cmp rsp,[r15+d]; ja stub]; ret */
        size_t poll = code[0] == 0x49 && code[1] == 0x3b && code[2] == 0x67   ? 4
                      : code[0] == 0x49 && code[1] == 0x3b && code[2] == 0xa7 ? 7
                                                                              : 0;
        bool ja_ret = code[poll] == 0x0f && code[poll + 1] == 0x87 && code[poll + 6] == 0xc3;
        if (code[0] == 0x5d) {
                r->cfa = 16;
                r->rbp_saved = true;
                r->rbp_off = -16;
        } else if (code[0] == 0xc3 || ja_ret) {
                r->cfa = 8;
                r->rbp_saved = false;
        }
}

/*
 * Whether blob b is still there: the same code, method and compilation. A
 * JVM that is gone changes its code no more, and what was read of it holds
 * (its last samples are named after it exits).
 */
static bool still_there(struct fp_hotspot *h, struct fp_hotspot_code_cache *c, const struct blob *b)
{
        struct blob now;

        errno = 0;
        if (!read_blob(h, c, b->start - h->size[T_HEAP_BLOCK], &now))
                return errno == ESRCH;
        return now.end == b->end && now.code_begin == b->code_begin && now.name_p == b->name_p &&
               now.method == b->method && now.compile_id == b->compile_id;
}

/* The cached blob holding pc, read again when it was read too long ago; NULL: none. */
static struct blob *cached(struct fp_hotspot *h, struct fp_hotspot_code_cache *c, uint64_t pc,
                           uint64_t now)
{
        size_t i = upper(c, pc);
        struct blob *b;

        if (i == 0 || pc >= c->blobs[i - 1].end)
                return NULL;
        b = &c->blobs[i - 1];
        if (now - b->checked_ns < FP_HOTSPOT_CODE_CHECK_NS)
                return b;
        if (still_there(h, c, b)) {
                b->checked_ns = now;
                return b;
        }
        blob_release(c, b);
        memmove(b, b + 1, (c->n_blobs - i) * sizeof(*b));
        c->n_blobs--;
        return NULL;
}

static struct blob *insert(struct fp_hotspot_code_cache *c, const struct blob *b)
{
        size_t i;

        if (c->n_blobs >= FP_HOTSPOT_MAX_BLOBS || c->bytes > FP_HOTSPOT_CODE_BYTES)
                drop_all(c);
        if (c->n_blobs == c->cap_blobs) {
                size_t cap = c->cap_blobs ? 2 * c->cap_blobs : 64;
                struct blob *nb = realloc(c->blobs, cap * sizeof(*nb));
                if (!nb)
                        return NULL;
                c->blobs = nb;
                c->cap_blobs = cap;
        }
        i = upper(c, b->start);
        /* A blob read now replaces what overlaps it (freed code, reused). */
        while (i > 0 && c->blobs[i - 1].end > b->start) {
                blob_release(c, &c->blobs[i - 1]);
                memmove(&c->blobs[i - 1], &c->blobs[i], (c->n_blobs - i) * sizeof(*b));
                c->n_blobs--;
                i--;
        }
        while (i < c->n_blobs && c->blobs[i].start < b->end) {
                blob_release(c, &c->blobs[i]);
                memmove(&c->blobs[i], &c->blobs[i + 1], (c->n_blobs - i - 1) * sizeof(*b));
                c->n_blobs--;
        }
        memmove(&c->blobs[i + 1], &c->blobs[i], (c->n_blobs - i) * sizeof(*b));
        c->blobs[i] = *b;
        c->n_blobs++;
        return &c->blobs[i];
}

/* The blob holding pc, read from the JVM; NULL: none (-ESRCH in *err when it is gone). */
static struct blob *find(struct fp_hotspot *h, struct fp_hotspot_code_cache *c, uint64_t pc,
                         uint64_t now, int *err)
{
        const struct heap *x = NULL;
        struct blob b;
        uint64_t block;

        for (size_t i = 0; i < c->n_heaps && !x; i++)
                if (pc >= c->heaps[i].low && pc < c->heaps[i].high)
                        x = &c->heaps[i];
        /* Code heaps grow as code is committed: a miss reads them again, now and then. */
        if (!x && now - c->heaps_read_ns > HEAPS_REREAD_NS) {
                *err = read_heaps(h, c);
                for (size_t i = 0; i < c->n_heaps && !x; i++)
                        if (pc >= c->heaps[i].low && pc < c->heaps[i].high)
                                x = &c->heaps[i];
        }
        if (!x || !(block = block_of(h, x, pc)) || !read_blob(h, c, block, &b) || pc < b.start ||
            pc >= b.end)
                return NULL;
        c->st.blobs_read++;
        b.checked_ns = now;
        return insert(c, &b);
}

int fp_hotspot_code_at(struct fp_hotspot *h, uint64_t pc, bool leaf, struct fp_hotspot_code *ret)
{
        struct fp_hotspot_code_cache *c = h ? cache(h) : NULL;
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        struct blob *b;
        int err = 0;

        *ret = (struct fp_hotspot_code){0};
        if (!c)
                return 0;
        c->st.lookups++;
        if (!(b = cached(h, c, pc, now)) && !(b = find(h, c, pc, now, &err))) {
                c->st.not_found++;
                return err == -ESRCH ? -ESRCH : 0;
        }
        if (b->kind == BLOB_OTHER || pc < b->code_begin) {
                ret->name = b->name;
                /*
                 * A stub with a frame size (a runtime stub's, a blob's that
                 * saves registers) is stepped by it where it called out, as
                 * HotSpot steps it; the rest keep a frame pointer.
                 */
                ret->frame = FP_HOTSPOT_FRAME_RBP;
                if (!leaf && b->frame_bytes) {
                        ret->frame = FP_HOTSPOT_FRAME_SIZE;
                        ret->cfa = b->frame_bytes;
                        ret->rbp_saved = true;
                        ret->rbp_off = -16;
                }
                return 1;
        }
        ret->compiled = true;
        if (!b->scopes_read)
                read_scopes(h, c, b);
        ret->n_methods = methods_at(c, b, (int64_t)(pc - b->code_begin), ret->methods);
        if (b->kind == BLOB_NATIVE) {
                ret->frame = FP_HOTSPOT_FRAME_RBP; /* a native method's wrapper: enter, leave */
                return 1;
        }
        ret->frame = FP_HOTSPOT_FRAME_SIZE;
        ret->cfa = b->frame_bytes;
        ret->rbp_saved = true;
        ret->rbp_off = -16;
        if (leaf)
                leaf_frame(h, b, pc, ret);
        if (ret->frame == FP_HOTSPOT_FRAME_UNKNOWN)
                c->st.frames_unknown++;
        return 1;
}

bool fp_hotspot_code_ok(struct fp_hotspot *h)
{
        return h && cache(h);
}

const char *fp_hotspot_code_why(const struct fp_hotspot *h)
{
        return h ? h->code_why : "";
}

void fp_hotspot_code_stats(const struct fp_hotspot *h, struct fp_hotspot_code_stats *ret)
{
        *ret = h && h->code ? h->code->st : (struct fp_hotspot_code_stats){0};
}

size_t fp_hotspot_code_heaps(struct fp_hotspot *h, uint64_t *low, uint64_t *high, size_t max)
{
        struct fp_hotspot_code_cache *c = h ? cache(h) : NULL;

        if (!c)
                return 0;
        for (size_t i = 0; i < c->n_heaps && i < max; i++) {
                low[i] = c->heaps[i].low;
                high[i] = c->heaps[i].high;
        }
        return c->n_heaps;
}
