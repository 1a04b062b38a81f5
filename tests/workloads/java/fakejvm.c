/* SPDX-License-Identifier: MIT */
/*
 * A hostile "libjvm.so" for test-java.sh (built as tests/fakejvm/libjvm.so,
 * run by tests/workloads/hostilejvm.c): it exports the VMStructs and
 * VMTypes tables a HotSpot JVM exports (gHotSpotVM*), with layouts of its
 * own, describing a code cache built to mislead whoever reads it:
 *
 *   loops  one heap over an anonymous executable page the process spins in;
 *          its segment map leads back segment by segment; its one blob says
 *          "nmethod", has a frame of 512 KiB (past any stack copy), a
 *          Method* that points at itself, and a scope whose sender is
 *          itself;
 *   free   the same heap, every segment free: no blob anywhere;
 *   endless a VMStructs table with no end (its entries repeat).
 *
 * fakejvm_run(mode) builds it and spins in the page for ever. What a reader
 * must do: stay bounded, name nothing it cannot read, and keep the samples.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct vm_struct {
        const char *type, *field, *type_string;
        int32_t is_static;
        uint64_t offset;
        void *address;
};

struct vm_type {
        const char *type, *superclass;
        uint64_t size;
};

#define PAGE_BYTES   65536
#define SEGMENT_LOG2 7
#define N_SEGMENTS   (PAGE_BYTES >> SEGMENT_LOG2)
#define ENDLESS      70000 /* entries: past any reader's bound */

/* The fake's own layouts. */
struct vspace {
        uint64_t low, high;
};
struct heap {
        uint64_t pad;
        struct vspace memory, segmap;
        int32_t log2_segment;
};
struct garray {
        int32_t len, max;
        uint64_t data;
};

static uint8_t segmap[N_SEGMENTS];
static struct heap heap;
static uint64_t heap_list[1];
static struct garray heaps_array;
static struct garray *heaps_p;

static struct vm_struct structs[] = {
    {"Method", "_constMethod", NULL, 0, 8, NULL},
    {"ConstMethod", "_constants", NULL, 0, 8, NULL},
    {"ConstMethod", "_name_index", NULL, 0, 34, NULL},
    {"ConstMethod", "_signature_index", NULL, 0, 36, NULL},
    {"ConstantPool", "_pool_holder", NULL, 0, 16, NULL},
    {"ConstantPool", "_length", NULL, 0, 24, NULL},
    {"Klass", "_name", NULL, 0, 16, NULL},
    {"Symbol", "_length", NULL, 0, 0, NULL},
    {"Symbol", "_body", NULL, 0, 6, NULL},
    {"CodeCache", "_heaps", NULL, 1, 0, &heaps_p},
    {"GrowableArrayBase", "_len", NULL, 0, 0, NULL},
    {"GrowableArray<int>", "_data", NULL, 0, 8, NULL},
    {"CodeHeap", "_memory", NULL, 0, offsetof(struct heap, memory), NULL},
    {"CodeHeap", "_segmap", NULL, 0, offsetof(struct heap, segmap), NULL},
    {"CodeHeap", "_log2_segment_size", NULL, 0, offsetof(struct heap, log2_segment), NULL},
    {"VirtualSpace", "_low", NULL, 0, 0, NULL},
    {"VirtualSpace", "_high", NULL, 0, 8, NULL},
    {"HeapBlock", "_header", NULL, 0, 0, NULL},
    {"HeapBlock::Header", "_used", NULL, 0, 8, NULL},
    {"CodeBlob", "_name", NULL, 0, 0, NULL},
    {"CodeBlob", "_frame_complete_offset", NULL, 0, 8, NULL},
    {"CodeBlob", "_frame_size", NULL, 0, 12, NULL},
    {"CodeBlob", "_code_begin", NULL, 0, 16, NULL},
    {"CodeBlob", "_code_end", NULL, 0, 24, NULL},
    {"CompiledMethod", "_method", NULL, 0, 32, NULL},
    {"CompiledMethod", "_scopes_data_begin", NULL, 0, 40, NULL},
    {"nmethod", "_stub_offset", NULL, 0, 48, NULL},
    {"nmethod", "_metadata_offset", NULL, 0, 52, NULL},
    {"nmethod", "_scopes_pcs_offset", NULL, 0, 56, NULL},
    {"nmethod", "_dependencies_offset", NULL, 0, 60, NULL},
    {"nmethod", "_verified_entry_point", NULL, 0, 64, NULL},
    {"nmethod", "_compile_id", NULL, 0, 72, NULL},
    {"PcDesc", "_pc_offset", NULL, 0, 0, NULL},
    {"PcDesc", "_scope_decode_offset", NULL, 0, 4, NULL},
    {NULL, NULL, NULL, 0, 0, NULL},
};
static struct vm_type vmtypes[] = {
    {"ConstantPool", NULL, 32}, {"HeapBlock", NULL, 16}, {"PcDesc", NULL, 16},
    {"nmethod", NULL, 128},     {NULL, NULL, 0},
};

struct vm_struct *gHotSpotVMStructs = structs;
uint64_t gHotSpotVMStructEntryArrayStride = sizeof(struct vm_struct);
uint64_t gHotSpotVMStructEntryTypeNameOffset = offsetof(struct vm_struct, type);
uint64_t gHotSpotVMStructEntryFieldNameOffset = offsetof(struct vm_struct, field);
uint64_t gHotSpotVMStructEntryOffsetOffset = offsetof(struct vm_struct, offset);
uint64_t gHotSpotVMStructEntryIsStaticOffset = offsetof(struct vm_struct, is_static);
uint64_t gHotSpotVMStructEntryAddressOffset = offsetof(struct vm_struct, address);
struct vm_type *gHotSpotVMTypes = vmtypes;
uint64_t gHotSpotVMTypeEntryArrayStride = sizeof(struct vm_type);
uint64_t gHotSpotVMTypeEntryTypeNameOffset = offsetof(struct vm_type, type);
uint64_t gHotSpotVMTypeEntrySizeOffset = offsetof(struct vm_type, size);

static void put(uint8_t *at, const void *v, size_t n)
{
        memcpy(at, v, n);
}

void fakejvm_run(const char *mode);

void fakejvm_run(const char *mode)
{
        uint8_t *page = mmap(NULL, PAGE_BYTES, PROT_READ | PROT_WRITE | PROT_EXEC,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        uint64_t a = (uint64_t)(uintptr_t)page, v;
        int32_t i32;

        if (page == MAP_FAILED)
                abort();
        if (strcmp(mode, "endless") == 0) {
                struct vm_struct *many = calloc(ENDLESS, sizeof(*many));
                if (!many)
                        abort();
                for (size_t i = 0; i < ENDLESS; i++)
                        many[i] = structs[i % 9];
                gHotSpotVMStructs = many;
        }
        heap.memory = (struct vspace){a, a + PAGE_BYTES};
        heap.segmap =
            (struct vspace){(uint64_t)(uintptr_t)segmap, (uint64_t)(uintptr_t)segmap + N_SEGMENTS};
        heap.log2_segment = SEGMENT_LOG2;
        heap_list[0] = (uint64_t)(uintptr_t)&heap;
        heaps_array = (struct garray){1, 1, (uint64_t)(uintptr_t)heap_list};
        heaps_p = &heaps_array;
        /* Each segment leads one back: the walk reaches the block only at the first. */
        for (size_t i = 0; i < N_SEGMENTS; i++)
                segmap[i] = strcmp(mode, "free") == 0 ? 0xff : i == 0 ? 0 : 1;

        /* The heap block and its blob, "nmethod". */
        uint8_t *blob = page + 16;
        v = 1;
        put(page + 8, &v, 1); /* used */
        static const char nmethod[] = "nmethod";
        v = (uint64_t)(uintptr_t)nmethod;
        put(blob + 0, &v, 8);
        i32 = 0; /* frame complete at once */
        put(blob + 8, &i32, 4);
        i32 = 65536; /* words: a 512 KiB frame */
        put(blob + 12, &i32, 4);
        v = a + 0x1000; /* code */
        put(blob + 16, &v, 8);
        v = a + 0x2000;
        put(blob + 24, &v, 8);
        v = a + 0x4000; /* a Method* whose fields point at itself */
        put(blob + 32, &v, 8);
        for (int k = 0; k < 8; k++)
                put(page + 0x4000 + 8 * k, &v, 8);
        v = a + 0x3000; /* scopes data */
        put(blob + 40, &v, 8);
        i32 = 0x2000 - 16; /* stubs */
        put(blob + 48, &i32, 4);
        i32 = 0x2800 - 16; /* metadata */
        put(blob + 52, &i32, 4);
        i32 = 0x3800 - 16; /* PcDescs */
        put(blob + 56, &i32, 4);
        i32 = 0x3800 - 16 + 3 * 16;
        put(blob + 60, &i32, 4);
        v = a + 0x1000;
        put(blob + 64, &v, 8);
        i32 = 7;
        put(blob + 72, &i32, 4);
        /* metadata[0]: the method; PcDescs: the sentinel, one at 0x800, the end. */
        v = a + 0x4000;
        put(page + 0x2800, &v, 8);
        const int32_t pcs[] = {-1, 0, 0, 0, 0x800, 1, 0, 0, 0x1000, 0, 0, 0};
        put(page + 0x3800, pcs, sizeof(pcs));
        /* The scope at 1: its sender is itself, its method metadata[0]. */
        const uint8_t scope[] = {1, 1, 1};
        put(page + 0x3001, scope, sizeof(scope));

        /* The code: jmp to itself, 0x100 into the blob's code. */
        page[0x1100] = 0xeb;
        page[0x1101] = 0xfe;
        __builtin___clear_cache((char *)page + 0x1100, (char *)page + 0x1102);
        ((void (*)(void))(uintptr_t)(a + 0x1100))();
}
