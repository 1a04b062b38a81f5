/* SPDX-License-Identifier: MIT */
/*
 * A V8 process's JavaScript frames, found in a sample's stack copy and
 * named through the process's memory (v8.h).
 *
 * Each process keeps, as its V8 state (maps.h: fp_maps_runtime_state()),
 * whether it runs V8 and with which layout, and the functions read so far:
 * an append-only table (a frame's addr is its entry's index, so that a
 * frame a bucket holds keeps its names whatever is read later), found by
 * SharedFunctionInfo address in a hash. An entry also holds a stamp of the
 * SharedFunctionInfo's name and script pointers: a function collected and
 * another allocated at its address reads anew, as a new entry.
 *
 * Every object is checked by its map's instance type before its fields
 * are used: a frame whose slots do not lead to a JSFunction and its
 * SharedFunctionInfo stays a native frame (counted), never a function it
 * is not. Strings are read bounded (FP_V8_NAME_MAX units, ConsStrings
 * FP_V8_STRING_DEPTH deep and FP_V8_NAME_NODES strings in all: a liar's
 * tree of empty halves costs no more); a script's source is read once, up
 * to FP_V8_SOURCE_MAX units and FP_V8_SOURCE_NODES strings, to count the
 * lines of its functions' starts.
 */
#include "v8.h"

#include "escape.h"
#include "log.h"
#include "maps.h"
#include "rtelf.h"
#include "symbols.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define FP_V8_NAME_MAX     256        /* units of a function's or file's name read */
#define FP_V8_STRING_DEPTH 16         /* ConsStrings followed into */
#define FP_V8_NAME_NODES   64         /* strings a name's tree may hold */
#define FP_V8_SOURCE_NODES 4096       /* strings a source's tree may hold */
#define FP_V8_SOURCE_MAX   (8u << 20) /* units of a script's source read for lines */
#define FP_V8_SCRIPTS      256        /* scripts whose lines are kept per process */
#define FP_V8_STRINGS_MAX  (8u << 20) /* bytes of names kept per process */
#define FP_V8_MAPS         64         /* JSFunction and SFI maps remembered */
#define FP_V8_LOOK_EVERY   64         /* stacks between looks for V8 in a process */
#define FP_V8_BATCH        64         /* objects read in one read of the process */
#define FP_V8_HEADER_MAX   64         /* bytes of an object's header read */
#define FP_V8_DEDUP        1024       /* slots of a stack's hash of its functions */
#define FP_V8_SCOPE_SLOTS  64         /* slots of a ScopeInfo looked through for a name */

struct function {
        uint64_t sfi, stamp;
        uint32_t name, file; /* offsets into the state's strings */
        int32_t line;
};

struct script {
        uint64_t addr, source; /* the Script and its source string */
        uint32_t *line_starts; /* the position each line after the first starts at */
        uint32_t n_lines;
        bool read; /* read (line_starts may still be NULL: unreadable) */
};

struct v8_state {
        int known;           /* 1 V8, -1 refused, 0 none found */
        size_t looked_maps;  /* its mappings at the last look */
        bool unread;         /* some file's table was not read then */
        unsigned since_look; /* frames since */
        struct fp_v8_layout l;
        uint64_t builtins_lo, builtins_hi;
        pid_t pid;
        struct function *fns;
        uint32_t n_fns, cap_fns;
        uint32_t *hash; /* entry + 1, 0 empty; 2 * FP_V8_FUNCTIONS slots */
        char *strs;
        size_t n_strs, cap_strs;
        struct script *scripts; /* FP_V8_SCRIPTS of them, once a function is read */
        uint64_t fn_maps[FP_V8_MAPS], sfi_maps[FP_V8_MAPS]; /* maps seen of those types */
        unsigned n_fn_maps, n_sfi_maps;
        struct fp_rt_stats st;
        int version[4];
};

#define HASH_SLOTS (2u * FP_V8_FUNCTIONS)

void fp_v8_state_free(void *state)
{
        struct v8_state *s = state;

        free(s->fns);
        free(s->hash);
        free(s->strs);
        for (size_t i = 0; s->scripts && i < FP_V8_SCRIPTS; i++)
                free(s->scripts[i].line_starts);
        free(s->scripts);
}

static struct v8_state *state_of(struct fp_maps *m)
{
        return fp_maps_runtime_state(m, fp_sym_inspector_slot(&fp_v8_inspector),
                                     sizeof(struct v8_state));
}

/* ---- the process's memory ---- */

static bool peek(const struct v8_state *s, uint64_t addr, void *buf, size_t len)
{
        return fp_rt_peek(s->pid, addr, buf, len) == 0;
}

static bool is_heap_object(const struct v8_state *s, uint64_t v)
{
        return (v & (uint64_t)s->l.heap_object_tag_mask) == (uint64_t)s->l.heap_object_tag;
}

static bool is_smi(const struct v8_state *s, uint64_t v)
{
        return (v & (uint64_t)s->l.smi_tag_mask) == 0;
}

static int64_t smi_value(const struct v8_state *s, uint64_t v)
{
        return (int64_t)v >> (s->l.smi_shift + 1);
}

/* The untagged address of a field of tagged object obj. */
static uint64_t field(const struct v8_state *s, uint64_t obj, int32_t off)
{
        return obj - (uint64_t)s->l.heap_object_tag + (uint64_t)(int64_t)off;
}

static bool read_word(const struct v8_state *s, uint64_t obj, int32_t off, uint64_t *ret)
{
        return off >= 0 && peek(s, field(s, obj, off), ret, 8);
}

/* The instance type of heap object obj, -1 unreadable. */
static int instance_type(const struct v8_state *s, uint64_t obj)
{
        uint64_t map;
        uint16_t type;

        if (!is_heap_object(s, obj) || !read_word(s, obj, s->l.heap_object_map, &map) ||
            !is_heap_object(s, map) || !peek(s, field(s, map, s->l.map_instance_type), &type, 2))
                return -1;
        return type;
}

static bool remembered(const uint64_t *set, unsigned n, uint64_t map)
{
        for (unsigned i = 0; i < n; i++)
                if (set[i] == map)
                        return true;
        return false;
}

/*
 * Whether map (an object's, read with its header) is of a type in lo..hi:
 * looked up among the maps seen of that type (maps are not moved), else
 * its instance type read and the map remembered.
 */
static bool map_has_type(struct v8_state *s, uint64_t map, int lo, int hi, uint64_t *set,
                         unsigned *n_set)
{
        uint16_t type;

        if (remembered(set, *n_set, map))
                return true;
        if (!is_heap_object(s, map) || !peek(s, field(s, map, s->l.map_instance_type), &type, 2) ||
            type < lo || type > hi)
                return false;
        if (*n_set < FP_V8_MAPS)
                set[(*n_set)++] = map;
        return true;
}

/*
 * The code units of string str into out (at most max), in order: Seq,
 * Cons (depth bounded), Thin and Sliced strings; external strings are not
 * read. Returns how many, or -1 when it is no string or did not read.
 */
static int64_t string_units(const struct v8_state *s, uint64_t str, uint64_t from, uint16_t *out,
                            uint64_t max, int depth, unsigned *nodes)
{
        const struct fp_v8_layout *l = &s->l;
        int type;
        int32_t len32;

        if (!*nodes)
                return -1; /* a tree of more strings than a name (or a source) may take */
        --*nodes;
        type = instance_type(s, str);
        if (type < 0 || type >= l->first_nonstring_type || depth > FP_V8_STRING_DEPTH ||
            (type & l->is_not_string_mask) != l->string_tag ||
            !peek(s, field(s, str, l->string_length), &len32, 4) || len32 < 0)
                return -1;
        uint64_t len = (uint64_t)len32;
        if (from >= len)
                return 0;
        uint64_t want = len - from < max ? len - from : max;
        int rep = type & l->representation_mask;
        bool one = (type & l->encoding_mask) == l->one_byte_tag;
        uint64_t a, b;

        if (rep == l->seq_tag) {
                if (one) {
                        uint8_t buf[4096];
                        for (uint64_t done = 0; done < want;) {
                                uint64_t k = want - done < sizeof(buf) ? want - done : sizeof(buf);
                                if (!peek(s, field(s, str, l->seq_one_byte_chars) + from + done,
                                          buf, k))
                                        return -1;
                                for (uint64_t i = 0; i < k; i++)
                                        out[done + i] = buf[i];
                                done += k;
                        }
                        return (int64_t)want;
                }
                if (!peek(s, field(s, str, l->seq_two_byte_chars) + 2 * from, out, 2 * want))
                        return -1;
                return (int64_t)want;
        }
        if (rep == l->cons_tag) {
                int32_t first_len;
                if (!read_word(s, str, l->cons_first, &a) ||
                    !read_word(s, str, l->cons_second, &b) ||
                    !peek(s, field(s, a, l->string_length), &first_len, 4) || first_len < 0)
                        return -1;
                int64_t n = 0, k;
                if (from < (uint64_t)first_len) {
                        if ((k = string_units(s, a, from, out, want, depth + 1, nodes)) < 0)
                                return -1;
                        n = k;
                }
                if ((uint64_t)n < want) {
                        uint64_t from2 = from + (uint64_t)n - (uint64_t)first_len;
                        if ((k = string_units(s, b, from2, out + n, want - (uint64_t)n, depth + 1,
                                              nodes)) < 0)
                                return -1;
                        n += k;
                }
                return n;
        }
        if (rep == l->thin_tag)
                return read_word(s, str, l->thin_actual, &a)
                           ? string_units(s, a, from, out, max, depth + 1, nodes)
                           : -1;
        if (rep == l->sliced_tag) {
                if (!read_word(s, str, l->sliced_parent, &a) ||
                    !read_word(s, str, l->sliced_offset, &b) || !is_smi(s, b))
                        return -1;
                return string_units(s, a, from + (uint64_t)smi_value(s, b), out, want, depth + 1,
                                    nodes);
        }
        return -1; /* external */
}

/* String str as UTF-8 into out (size > 0): false when it did not read. */
static bool string_utf8(const struct v8_state *s, uint64_t str, char *out, size_t size)
{
        uint16_t u[FP_V8_NAME_MAX];
        unsigned nodes = FP_V8_NAME_NODES;
        int64_t n = string_units(s, str, 0, u, FP_V8_NAME_MAX, 0, &nodes);
        size_t o = 0;

        if (n < 0)
                return false;
        for (int64_t i = 0; i < n && o + 4 < size; i++) {
                uint32_t c = u[i];
                if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && u[i + 1] >= 0xdc00 &&
                    u[i + 1] <= 0xdfff) {
                        c = 0x10000 + ((c - 0xd800) << 10) + (u[i + 1] - 0xdc00);
                        i++;
                } else if (c >= 0xd800 && c <= 0xdfff) {
                        c = 0xfffd;
                }
                if (c < 0x20 || c == 0x7f)
                        out[o++] = '?'; /* names are one line */
                else
                        o += fp_utf8_put(out + o, c);
        }
        out[o] = 0;
        return true;
}

/* ---- functions ---- */

/* Whether the process's V8 is at least major.minor.build (false when unknown). */
static bool at_least(const struct v8_state *s, int major, int minor, int build)
{
        const int *v = s->version;

        if (v[0] != major)
                return v[0] > major;
        if (v[1] != minor)
                return v[1] > minor;
        return v[2] >= build;
}

/*
 * A ScopeInfo's function name and start position: past its fixed slots and
 * its context locals' names and infos, the first string is the function's
 * name (empty for an anonymous function expression: then the string after
 * it, the name V8 inferred from where the function was put, as
 * "Module._compile"); in V8 before 12.8.44 two Smis after it, the lower
 * first, are its start and end, from then on slots 3 and 4 (V8 keeps no
 * layout of these in its metadata: the slots are looked through,
 * FP_V8_SCOPE_SLOTS at most).
 */
static void scope_info_name(const struct v8_state *s, uint64_t si, char *name, size_t size,
                            int64_t *ret_start)
{
        uint64_t slots[FP_V8_SCOPE_SLOTS], base = field(s, si, s->l.heap_object_map) + 8;
        int idx = s->l.scopeinfo_first_vars, n = FP_V8_SCOPE_SLOTS, strings = 0;
        bool named = false;

        *ret_start = -1;
        name[0] = 0;
        if (!peek(s, base, slots, sizeof(slots))) {
                n = 16; /* (a small ScopeInfo at the end of its page: its first slots only) */
                if (!peek(s, base, slots, (size_t)n * sizeof(slots[0])))
                        return;
        }
        if (s->l.scopeinfo_ncontextlocals < 0 || s->l.scopeinfo_ncontextlocals >= n ||
            !is_smi(s, slots[s->l.scopeinfo_ncontextlocals]))
                return;
        bool fixed = at_least(s, 12, 8, 44);
        if (fixed && is_smi(s, slots[3]) && is_smi(s, slots[4]) &&
            smi_value(s, slots[3]) < smi_value(s, slots[4]))
                *ret_start = smi_value(s, slots[3]);
        int64_t locals = smi_value(s, slots[s->l.scopeinfo_ncontextlocals]);
        if (locals < 0 || idx + 2 * locals >= n)
                return; /* its name lies past what is read: unnamed, not misnamed */
        idx += 2 * (int)locals;
        for (uint64_t prev = 1; idx >= 0 && idx < n; prev = slots[idx], idx++) {
                if (!named && is_heap_object(s, slots[idx]) && strings < 2) {
                        /* The name, or an empty one and then the inferred one. */
                        strings++;
                        named = string_utf8(s, slots[idx], name, size) && name[0];
                        if (!named)
                                name[0] = 0;
                        if (named || strings == 1)
                                continue;
                }
                if (named && fixed)
                        return;
                if (named && is_smi(s, prev) && is_smi(s, slots[idx]) &&
                    smi_value(s, prev) < smi_value(s, slots[idx])) {
                        *ret_start = smi_value(s, prev);
                        return;
                }
        }
}

static struct script *script_lines(struct v8_state *s, uint64_t script)
{
        uint64_t source;
        struct script *sc;

        if (s->l.script_source < 0 || !read_word(s, script, s->l.script_source, &source))
                return NULL;
        if (!s->scripts && !(s->scripts = calloc(FP_V8_SCRIPTS, sizeof(*s->scripts))))
                return NULL;
        sc = &s->scripts[(script >> 4) % FP_V8_SCRIPTS];
        if (sc->read && sc->addr == script && sc->source == source)
                return sc;
        free(sc->line_starts);
        *sc = (struct script){.addr = script, .source = source, .read = true};
        uint16_t *u = malloc(FP_V8_SOURCE_MAX * sizeof(*u));
        unsigned nodes = FP_V8_SOURCE_NODES;
        int64_t n = u ? string_units(s, source, 0, u, FP_V8_SOURCE_MAX, 0, &nodes) : -1;
        uint32_t lines = 0;
        for (int64_t i = 0; i < n; i++)
                lines += u[i] == '\n';
        if (n >= 0 && (sc->line_starts = malloc(((size_t)lines + 1) * sizeof(uint32_t)))) {
                for (int64_t i = 0; i < n; i++)
                        if (u[i] == '\n')
                                sc->line_starts[sc->n_lines++] = (uint32_t)i + 1;
        }
        free(u);
        return sc;
}

/* The 1-based line of position pos in script, 0 unknown. */
static int32_t line_of(struct v8_state *s, uint64_t script, int64_t pos)
{
        struct script *sc;

        if (pos < 0 || !(sc = script_lines(s, script)) || !sc->line_starts)
                return 0;
        uint32_t lo = 0, hi = sc->n_lines; /* lines starting at or before pos: lo */
        while (lo < hi) {
                uint32_t mid = (lo + hi) / 2;
                if (sc->line_starts[mid] <= (uint64_t)pos)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return (int32_t)lo + 1;
}

static uint32_t keep_string(struct v8_state *s, const char *str)
{
        size_t n = strlen(str) + 1;

        if (s->n_strs + n > s->cap_strs) {
                size_t cap = s->cap_strs ? s->cap_strs * 2 : 65536;
                while (cap < s->n_strs + n)
                        cap *= 2;
                char *p = cap <= FP_V8_STRINGS_MAX ? realloc(s->strs, cap) : NULL;
                if (!p)
                        return 0; /* offset 0: "" */
                s->strs = p;
                s->cap_strs = cap;
                if (!s->n_strs)
                        s->strs[s->n_strs++] = 0;
        }
        memcpy(s->strs + s->n_strs, str, n);
        s->n_strs += n;
        return (uint32_t)(s->n_strs - n);
}

/*
 * The entry of SharedFunctionInfo sfi whose name-or-scope-info and script
 * fields hold nos and script (its stamp: both mixed), read now if new; -1.
 */
static int64_t function_entry(struct v8_state *s, uint64_t sfi, uint64_t nos, uint64_t script)
{
        const struct fp_v8_layout *l = &s->l;
        uint64_t stamp = nos * 0x9e3779b97f4a7c15ull ^ script;
        uint32_t h, i;

        if (!s->hash && !(s->hash = calloc(HASH_SLOTS, sizeof(*s->hash))))
                return -1;
        for (h = (uint32_t)((sfi >> 3) * 0x9e3779b1u) % HASH_SLOTS;; h = (h + 1) % HASH_SLOTS) {
                i = s->hash[h];
                if (!i)
                        break;
                if (s->fns[i - 1].sfi == sfi && s->fns[i - 1].stamp == stamp)
                        return i - 1;
        }
        if (s->n_fns >= FP_V8_FUNCTIONS) {
                s->st.functions_full++;
                return -1;
        }
        if (s->n_fns == s->cap_fns) {
                uint32_t cap = s->cap_fns ? s->cap_fns * 2 : 256;
                struct function *p = realloc(s->fns, cap * sizeof(*p));
                if (!p)
                        return -1;
                s->fns = p;
                s->cap_fns = cap;
        }

        char name[4 * FP_V8_NAME_MAX + 1] = "", file[4 * FP_V8_NAME_MAX + 1] = "";
        int64_t start = -1;
        int t = instance_type(s, nos);
        if (t == l->type_scope_info)
                scope_info_name(s, nos, name, sizeof(name), &start);
        else if (t >= 0 && t < l->first_nonstring_type && !string_utf8(s, nos, name, sizeof(name)))
                name[0] = 0;
        if (start < 0 && l->sfi_function_data >= 0 && l->uncompiled_start_position >= 0) {
                uint64_t data;
                int32_t pos;
                int dt =
                    read_word(s, sfi, l->sfi_function_data, &data) ? instance_type(s, data) : -1;
                if (dt >= l->type_uncompiled_first && dt <= l->type_uncompiled_last &&
                    peek(s, field(s, data, l->uncompiled_start_position), &pos, 4))
                        start = pos;
        }
        int32_t line = 0;
        if (instance_type(s, script) == l->type_script) {
                uint64_t sname;
                if (read_word(s, script, l->script_name, &sname) &&
                    !string_utf8(s, sname, file, sizeof(file)))
                        file[0] = 0;
                line = line_of(s, script, start);
        }
        s->fns[s->n_fns] = (struct function){.sfi = sfi,
                                             .stamp = stamp,
                                             .name = name[0] ? keep_string(s, name) : 0,
                                             .file = file[0] ? keep_string(s, file) : 0,
                                             .line = line};
        s->hash[h] = ++s->n_fns;
        s->st.functions++;
        return s->n_fns - 1;
}

/* ---- recognising a process ---- */

/*
 * Looks through the process's live files for a V8 build: 1 found, -1
 * refused, 0 none; *ret_unread whether some file's table is not read yet.
 */
static int look(struct v8_state *s, struct fp_maps *m, bool *ret_unread)
{
        size_t slot = fp_sym_inspector_slot(&fp_v8_inspector);

        *ret_unread = false;
        for (size_t i = 0; i < fp_maps_n_live(m); i++) {
                const struct fp_mapping *x = fp_maps_live_at(m, i);
                const struct fp_v8_facts *f =
                    x && x->symtab ? fp_symtab_facts(x->symtab, slot) : NULL;
                uint64_t vaddr;
                if (x && x->kind == FP_MAPPING_FILE && !x->symtab_tried)
                        *ret_unread = true;
                if (!f || !f->v8)
                        continue;
                if (f->missing[0]) {
                        snprintf(s->st.refused, sizeof(s->st.refused),
                                 "%s has V8's metadata but not %s", x->path, f->missing);
                        if (!fp_symtab_refusal_said(x->symtab, slot)) {
                                fp_log(LOG_WARNING, "v8: %s; its samples stay native-only",
                                       s->st.refused);
                                fp_symcache_count_refusal(fp_maps_symcache(m), slot);
                        }
                        return -1;
                }
                if (fp_symtab_offset_to_vaddr(x->symtab, x->pgoff, &vaddr) < 0)
                        continue;
                s->l = f->layout;
                s->builtins_lo = f->builtins_start ? f->builtins_start + x->start - vaddr : 0;
                s->builtins_hi = f->builtins_start ? f->builtins_end + x->start - vaddr : 0;
                memcpy(s->version, f->version, sizeof(s->version));
                if (f->version[0])
                        snprintf(s->st.runtime, sizeof(s->st.runtime), "V8 %d.%d.%d.%d",
                                 f->version[0], f->version[1], f->version[2], f->version[3]);
                else
                        snprintf(s->st.runtime, sizeof(s->st.runtime), "V8");
                return 1;
        }
        return 0;
}

/* Whether the process is known to run V8 now (looked for as the comment in fp_v8_frames() says). */
static bool is_v8(struct v8_state *s, struct fp_maps *m)
{
        bool unread;

        if (!s || s->known < 0)
                return false;
        if (s->known > 0)
                return true;
        /*
         * Looked at again when its mappings change, or every
         * FP_V8_LOOK_EVERY stacks while some file's table is still to be
         * read (they are read as samples hit them).
         */
        if (s->looked_maps && fp_maps_count(m) == s->looked_maps &&
            (!s->unread || ++s->since_look < FP_V8_LOOK_EVERY))
                return false;
        /* A first look: Node's own files (node, libnode.so) read now, not at their first frame. */
        if (!s->looked_maps)
                fp_maps_read_files_named(m, "node");
        s->looked_maps = fp_maps_count(m);
        s->since_look = 0;
        s->pid = fp_maps_pid(m);
        s->known = look(s, m, &unread);
        s->unread = unread;
        return s->known > 0;
}

/* Whether ip is in anonymous memory of the process (V8's code space). */
static bool in_anon(struct fp_maps *m, uint64_t ip)
{
        uint32_t idx = fp_maps_find(m, ip);

        return idx && fp_maps_get(m, idx)->kind == FP_MAPPING_ANON;
}

/* The word at byte off of a header read into buf (len bytes), 0 past it. */
static uint64_t word_at(const uint8_t *buf, size_t len, int32_t off)
{
        uint64_t v = 0;

        if (off >= 0 && (size_t)off + 8 <= len)
                memcpy(&v, buf + off, 8);
        return v;
}

/*
 * Reads n objects' headers (len bytes each, from the untagged addresses
 * addr[]) into bufs (n * len), with as few reads of the process as its
 * iovec limit allows; ok[i] whether object i read. One that does not read
 * ends a batch: those after it are read again on their own.
 */
static void read_headers(const struct v8_state *s, const uint64_t *addr, size_t n, size_t len,
                         uint8_t *bufs, bool *ok)
{
        struct iovec local[FP_V8_BATCH], remote[FP_V8_BATCH];

        for (size_t i = 0; i < n;) {
                size_t k = n - i < FP_V8_BATCH ? n - i : FP_V8_BATCH;
                for (size_t j = 0; j < k; j++) {
                        local[j] = (struct iovec){bufs + (i + j) * len, len};
                        remote[j] = (struct iovec){(void *)(uintptr_t)addr[i + j], len};
                }
                ssize_t got = process_vm_readv(s->pid, local, k, remote, k, 0);
                size_t whole = got > 0 ? (size_t)got / len : 0;
                for (size_t j = 0; j < whole && j < k; j++)
                        ok[i + j] = true;
                if (whole < k) {
                        ok[i + whole] = peek(s, addr[i + whole], bufs + (i + whole) * len, len);
                        i += whole + 1;
                } else {
                        i += k;
                }
        }
}

/* The index of v among the n values u[] (hash: slots of FP_V8_DEDUP, indexes + 1), added if new. */
static size_t unique(uint64_t v, uint64_t *u, size_t *n, uint16_t *hash)
{
        for (uint32_t h = (uint32_t)((v >> 3) * 0x9e3779b1u) % FP_V8_DEDUP;;
             h = (h + 1) % FP_V8_DEDUP) {
                if (!hash[h]) {
                        u[*n] = v;
                        hash[h] = (uint16_t)++ * n;
                        return *n - 1;
                }
                if (u[hash[h] - 1] == v)
                        return hash[h] - 1;
        }
}

int fp_v8_frames(struct fp_maps *m, const struct fp_rt_frame_at *at, size_t n, struct fp_frame *ret,
                 bool *found)
{
        struct v8_state *s = state_of(m);
        const struct fp_v8_layout *l;
        size_t frame[FP_V8_MAX_FRAMES], which[FP_V8_MAX_FRAMES], k = 0, nu = 0, fn_len, sfi_len;
        uint64_t addr[FP_V8_MAX_FRAMES], sfi[FP_V8_MAX_FRAMES];
        int64_t entry[FP_V8_MAX_FRAMES];
        uint8_t bufs[FP_V8_MAX_FRAMES * FP_V8_HEADER_MAX];
        bool ok[FP_V8_MAX_FRAMES];
        uint16_t hash[FP_V8_DEDUP] = {0};
        int named = 0;

        if (!is_v8(s, m))
                return 0;
        l = &s->l;
        /*
         * The frames of V8's code that hold a function, by their slots in
         * the stack copy; each function read once however many frames it
         * has (a recursion).
         */
        for (size_t i = 0; i < n && k < FP_V8_MAX_FRAMES; i++) {
                const struct fp_rt_frame_at *a = &at[i];
                uint64_t ctx_slot, fn_slot;
                uint64_t a_ctx = a->bp + (uint64_t)(int64_t)l->off_fp_context;
                uint64_t a_fn = a->bp + (uint64_t)(int64_t)l->off_fp_function;
                if (!(a->ip >= s->builtins_lo && a->ip < s->builtins_hi) && !in_anon(m, a->ip))
                        continue;
                if (!a->stack || a_ctx < a->sp || a_fn < a->sp || a_ctx + 8 > a->sp + a->size ||
                    a_fn + 8 > a->sp + a->size)
                        continue;
                memcpy(&ctx_slot, a->stack + (a_ctx - a->sp), 8);
                memcpy(&fn_slot, a->stack + (a_fn - a->sp), 8);
                if (is_smi(s, ctx_slot)) {
                        s->st.typed++; /* a stub's, an entry's or an exit's */
                        continue;
                }
                if (!is_heap_object(s, fn_slot)) {
                        s->st.no_function++;
                        continue;
                }
                frame[k] = i;
                which[k++] = unique(field(s, fn_slot, 0), addr, &nu, hash);
        }
        if (!k)
                return 0;
        /* The JSFunctions' headers, then their SharedFunctionInfos', each in as few reads. */
        fn_len = (size_t)(l->js_function_shared > l->heap_object_map ? l->js_function_shared
                                                                     : l->heap_object_map) +
                 8;
        sfi_len = (size_t)(l->sfi_name_or_scope_info > l->sfi_script_or_debug_info
                               ? l->sfi_name_or_scope_info
                               : l->sfi_script_or_debug_info) +
                  8;
        if (fn_len > FP_V8_HEADER_MAX || sfi_len > FP_V8_HEADER_MAX)
                return 0;
        memset(ok, 0, nu * sizeof(*ok));
        read_headers(s, addr, nu, fn_len, bufs, ok);
        for (size_t u = 0; u < nu; u++) {
                const uint8_t *b = bufs + u * fn_len;
                uint64_t map = word_at(b, fn_len, l->heap_object_map);
                entry[u] = ok[u] ? -2 : -1; /* not a JSFunction; or unreadable */
                sfi[u] = 0;
                /* JSFunction and the 14 types of its subclasses after it (V8 9.6 on). */
                if (!ok[u] || !map_has_type(s, map, l->type_js_function, l->type_js_function + 14,
                                            s->fn_maps, &s->n_fn_maps))
                        continue;
                entry[u] = -1; /* unreadable, until its SharedFunctionInfo reads */
                sfi[u] = word_at(b, fn_len, l->js_function_shared);
                if (!is_heap_object(s, sfi[u]))
                        sfi[u] = 0;
        }
        for (size_t u = 0; u < nu; u++)
                addr[u] = sfi[u] ? field(s, sfi[u], 0) : 0;
        memset(ok, 0, nu * sizeof(*ok));
        read_headers(s, addr, nu, sfi_len, bufs, ok);
        for (size_t u = 0; u < nu; u++) {
                const uint8_t *b = bufs + u * sfi_len;
                if (!sfi[u] || !ok[u])
                        continue;
                uint64_t map = word_at(b, sfi_len, l->heap_object_map);
                if (map_has_type(s, map, l->type_sfi, l->type_sfi, s->sfi_maps, &s->n_sfi_maps))
                        entry[u] = function_entry(s, sfi[u],
                                                  word_at(b, sfi_len, l->sfi_name_or_scope_info),
                                                  word_at(b, sfi_len, l->sfi_script_or_debug_info));
        }
        for (size_t j = 0; j < k; j++) {
                int64_t e = entry[which[j]];
                if (e == -2) {
                        s->st.no_function++;
                } else if (e < 0) {
                        s->st.unreadable++;
                } else {
                        s->st.frames++;
                        ret[frame[j]] =
                            (struct fp_frame){.addr = (uint64_t)e, .flags = FP_FRAME_RUNTIME};
                        found[frame[j]] = true;
                        named++;
                }
        }
        return named;
}

bool fp_v8_name(struct fp_maps *m, const struct fp_frame *f, struct fp_rt_name *ret)
{
        struct v8_state *s = state_of(m);
        const struct function *fn;

        if (!s || !(f->flags & FP_FRAME_RUNTIME) || f->addr >= s->n_fns)
                return false;
        fn = &s->fns[f->addr];
        ret->function = fn->name ? s->strs + fn->name : "(anonymous)";
        ret->filename = fn->file ? s->strs + fn->file : "";
        ret->line = fn->line;
        return true;
}

void fp_v8_stats(struct fp_maps *m, struct fp_rt_stats *ret)
{
        struct v8_state *s = state_of(m);

        *ret = s ? s->st : (struct fp_rt_stats){0};
}
