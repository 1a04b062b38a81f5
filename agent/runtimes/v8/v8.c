/* SPDX-License-Identifier: MIT */
/*
 * A V8 build recognised by its v8dbg_* symbols (v8.h): the inspector the
 * symbol tables run on every file a process maps.
 */
#include "v8.h"

#include "log.h"
#include "rtelf.h"
#include "symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * The symbols read, each into one field of the layout. A name ending in
 * "__" is a class field's, whose type V8's versions spell differently
 * (Object, Tagged_Object_, ...): any type matches. Names a field has had
 * in other versions follow a '|'. Required: the walk and the names cannot
 * do without it.
 */
struct wanted {
        const char *name;
        size_t field;
        bool required;
};
#define F(x) offsetof(struct fp_v8_layout, x)
static const struct wanted wanted[] = {
    {"v8dbg_TaggedSize", F(tagged_size), true},
    {"v8dbg_SmiShiftSize", F(smi_shift), true},
    {"v8dbg_SmiTagMask", F(smi_tag_mask), true},
    {"v8dbg_HeapObjectTag", F(heap_object_tag), true},
    {"v8dbg_HeapObjectTagMask", F(heap_object_tag_mask), true},
    {"v8dbg_off_fp_function", F(off_fp_function), true},
    {"v8dbg_off_fp_context", F(off_fp_context), true},
    {"v8dbg_off_fp_bytecode_offset", F(off_fp_bytecode_offset), false},
    {"v8dbg_class_HeapObject__map__", F(heap_object_map), true},
    {"v8dbg_class_Map__instance_type__", F(map_instance_type), true},
    {"v8dbg_class_JSFunction__shared__", F(js_function_shared), true},
    {"v8dbg_class_SharedFunctionInfo__name_or_scope_info__", F(sfi_name_or_scope_info), true},
    {"v8dbg_class_SharedFunctionInfo__script_or_debug_info__|"
     "v8dbg_class_SharedFunctionInfo__raw_script__",
     F(sfi_script_or_debug_info), true},
    {"v8dbg_class_SharedFunctionInfo__function_data__", F(sfi_function_data), false},
    {"v8dbg_class_Script__name__", F(script_name), true},
    {"v8dbg_class_Script__source__", F(script_source), false},
    {"v8dbg_class_String__length__", F(string_length), true},
    {"v8dbg_class_SeqOneByteString__chars__", F(seq_one_byte_chars), true},
    {"v8dbg_class_SeqTwoByteString__chars__", F(seq_two_byte_chars), true},
    {"v8dbg_class_ConsString__first__", F(cons_first), true},
    {"v8dbg_class_ConsString__second__", F(cons_second), true},
    {"v8dbg_class_ThinString__actual__", F(thin_actual), true},
    {"v8dbg_class_SlicedString__parent__", F(sliced_parent), true},
    {"v8dbg_class_SlicedString__offset__", F(sliced_offset), true},
    {"v8dbg_class_UncompiledData__start_position__", F(uncompiled_start_position), false},
    {"v8dbg_scopeinfo_idx_first_vars", F(scopeinfo_first_vars), true},
    {"v8dbg_scopeinfo_idx_ncontextlocals", F(scopeinfo_ncontextlocals), true},
    {"v8dbg_IsNotStringMask", F(is_not_string_mask), true},
    {"v8dbg_StringTag", F(string_tag), true},
    {"v8dbg_StringRepresentationMask", F(representation_mask), true},
    {"v8dbg_StringEncodingMask", F(encoding_mask), true},
    {"v8dbg_SeqStringTag", F(seq_tag), true},
    {"v8dbg_ConsStringTag", F(cons_tag), true},
    {"v8dbg_SlicedStringTag", F(sliced_tag), true},
    {"v8dbg_ThinStringTag", F(thin_tag), true},
    {"v8dbg_OneByteStringTag", F(one_byte_tag), true},
    {"v8dbg_TwoByteStringTag", F(two_byte_tag), true},
    {"v8dbg_FirstNonstringType", F(first_nonstring_type), true},
    {"v8dbg_type_JSFunction__JS_FUNCTION_TYPE", F(type_js_function), true},
    {"v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", F(type_sfi), true},
    {"v8dbg_type_Script__SCRIPT_TYPE", F(type_script), true},
    {"v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE", F(type_scope_info), true},
};
#undef F
#define N_WANTED (sizeof(wanted) / sizeof(wanted[0]))

static bool matches(const char *sym, const char *want)
{
        for (;;) {
                const char *bar = strchr(want, '|');
                size_t n = bar ? (size_t)(bar - want) : strlen(want);
                if (n > 2 && want[n - 1] == '_' && want[n - 2] == '_') {
                        if (strncmp(sym, want, n) == 0)
                                return true; /* a class field, of any type */
                } else if (strlen(sym) == n && strncmp(sym, want, n) == 0) {
                        return true;
                }
                if (!bar)
                        return false;
                want = bar + 1;
        }
}

/* Instance types the names need, from the type symbols' names (UncompiledData's range). */
static void note_type(const char *sym, int32_t v, struct fp_v8_layout *l)
{
        if (strncmp(sym, "v8dbg_type_UncompiledData", 25) != 0)
                return;
        if (l->type_uncompiled_first < 0 || v < l->type_uncompiled_first)
                l->type_uncompiled_first = v;
        if (v > l->type_uncompiled_last)
                l->type_uncompiled_last = v;
}

struct inspection {
        Elf *elf;
        struct fp_v8_facts *f;
        bool found[N_WANTED];
};

static void inspect_symbol(void *userdata, const char *sn, const GElf_Sym *s)
{
        struct inspection *in = userdata;
        struct fp_v8_facts *f = in->f;
        int32_t *fields = (int32_t *)&f->layout, v;

        if (strncmp(sn, "Builtins_", 9) == 0 && GELF_ST_TYPE(s->st_info) == STT_FUNC) {
                uint64_t end = s->st_value + (s->st_size ? s->st_size : 1);
                if (!f->builtins_start || s->st_value < f->builtins_start)
                        f->builtins_start = s->st_value;
                if (end > f->builtins_end)
                        f->builtins_end = end;
                return;
        }
        /* V8's version: v8::internal::Version::major_ and the rest, ints. */
        static const char *const version[4] = {
            "_ZN2v88internal7Version6major_E", "_ZN2v88internal7Version6minor_E",
            "_ZN2v88internal7Version6build_E", "_ZN2v88internal7Version6patch_E"};
        for (int k = 0; k < 4; k++)
                if (strcmp(sn, version[k]) == 0 && fp_rt_elf_read(in->elf, s->st_value, &v, 4))
                        f->version[k] = v;
        if (strncmp(sn, "v8dbg_", 6) != 0 || !fp_rt_elf_read(in->elf, s->st_value, &v, 4))
                return;
        f->v8 = true;
        note_type(sn, v, &f->layout);
        for (size_t k = 0; k < N_WANTED; k++)
                if (!in->found[k] && matches(sn, wanted[k].name)) {
                        fields[wanted[k].field / sizeof(int32_t)] = v;
                        in->found[k] = true;
                }
}

void fp_v8_inspect(Elf *elf, struct fp_v8_facts *ret)
{
        struct inspection in = {.elf = elf, .f = ret};
        int32_t *fields = (int32_t *)&ret->layout;

        memset(ret, 0, sizeof(*ret));
        for (size_t i = 0; i < sizeof(ret->layout) / sizeof(int32_t); i++)
                fields[i] = -1;
        fp_rt_elf_symbols(elf, inspect_symbol, &in);
        if (!ret->v8)
                return;
        for (size_t k = 0; k < N_WANTED; k++)
                if (wanted[k].required && !in.found[k]) {
                        snprintf(ret->missing, sizeof(ret->missing), "%.*s",
                                 (int)strcspn(wanted[k].name + 6, "|"), wanted[k].name + 6);
                        break;
                }
        if (!ret->missing[0] && ret->layout.tagged_size != 8)
                snprintf(ret->missing, sizeof(ret->missing),
                         "64-bit tagged values (TaggedSize %d: pointer compression)",
                         (int)ret->layout.tagged_size);
}

int fp_v8_inspect_file(const char *path, struct fp_v8_facts *ret)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        Elf *elf;

        if (fd < 0)
                return -errno;
        elf_version(EV_CURRENT);
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf || elf_kind(elf) != ELF_K_ELF) {
                if (elf)
                        elf_end(elf);
                close(fd);
                return -ENOEXEC;
        }
        fp_v8_inspect(elf, ret);
        elf_end(elf);
        close(fd);
        return 0;
}

static void inspect(Elf *elf, void *facts)
{
        fp_v8_inspect(elf, facts);
}

static bool is_runtime(const void *facts)
{
        return ((const struct fp_v8_facts *)facts)->v8;
}

const struct fp_sym_inspector fp_v8_inspector = {"v8", sizeof(struct fp_v8_facts), inspect,
                                                 is_runtime, fp_v8_state_free};
