/* The call counter's dlsym interposer (preloaded: LD_PRELOAD).
 *
 * The counting shim (ccount.c) sits ahead of the MPI library in the
 * global symbol scope, so every MPI_X found there reaches its wrapper.
 * Code that looks MPI_X up on the MPI library's own handle
 * (dlsym(dlopen("libmpi.so"), "MPI_Send"), which is what ctypes.CDLL,
 * cffi's dlopen and numba do) gets libmpi's function directly and
 * bypasses it.  This library, preloaded ahead of the C library, answers
 * such a lookup with the shim's wrapper instead, so those calls are
 * counted too (as invisible: their caller is not mpi4py).  Lookups made
 * by the shim itself and by libmpi are left alone, as is any function the
 * shim does not wrap.
 *
 * Not a dynamic-linker audit library (la_symbind), which would see the
 * same lookups: while an auditor watches bindings, the linker allocates a
 * table for every library loaded afterwards on the application's heap.
 * That moved a NumPy loop's arrays and made it 2.4x slower traced than
 * untraced.  This interposer allocates nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym;

/* The C library's dlsym, by version (calling dlsym here would find this
 * one): 2.34 moved it into libc; before, libdl's base version per
 * architecture. */
static void find_real(void)
{
    static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.27",
                                     "GLIBC_2.3", "GLIBC_2.2", "GLIBC_2.0"};
    for (size_t i = 0; !real_dlsym && i < sizeof versions / sizeof *versions; i++)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
}

__attribute__((constructor)) static void start(void)
{
    find_real();
}

/* Whether the interposer found the C library's dlsym (checked by ccount.py). */
int rr_dlsym_ready(void)
{
    return real_dlsym != NULL;
}

static const char *base_name(const char *path)
{
    const char *base = path ? strrchr(path, '/') : NULL;
    return base ? base + 1 : (path ? path : "");
}

static int is_libmpi(const struct link_map *m)
{
    const char *b = base_name(m->l_name);
    return strncmp(b, "libmpi.", 7) == 0 || strncmp(b, "libmpi_", 7) == 0;
}

static int is_shim(const struct link_map *m)
{
    return strstr(base_name(m->l_name), "repreplay_ccount") != NULL;
}

/* The loaded object holding address ``p``, or NULL. */
static struct link_map *object_of(const void *p)
{
    Dl_info info;
    struct link_map *m = NULL;
    if (!dladdr1(p, &info, (void **)&m, RTLD_DL_LINKMAP))
        return NULL;
    return m;
}

/* The address of the function ``name`` that ``m`` defines, from its
 * dynamic symbol table (a lookup through dlsym could allocate); 0 if it
 * has none.  GNU ld puts .dynsym right before .dynstr. */
static void *defined_in(const struct link_map *m, const char *name)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)d->d_un.d_ptr;
        else if (d->d_tag == DT_STRTAB)
            strtab = (const char *)d->d_un.d_ptr;
    }
    if (!symtab || !strtab || (const char *)symtab > strtab)
        return NULL;
    for (const ElfW(Sym) *s = symtab; (const char *)(s + 1) <= strtab; s++)
        if (s->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
            strcmp(strtab + s->st_name, name) == 0)
            return (void *)(m->l_addr + s->st_value);
    return NULL;
}

/* The shim's wrapper for ``name`` when ``found`` is libmpi's function and
 * the lookup came from neither the shim nor libmpi; else ``found``. */
static void *counted(void *found, const char *name, const void *caller)
{
    struct link_map *def = object_of(found), *from = object_of(caller), *m;
    if (!def || !is_libmpi(def) || (from && (from == def || is_shim(from))))
        return found;
    for (m = def; m->l_prev; m = m->l_prev)
        ;
    for (; m; m = m->l_next)
        if (is_shim(m)) {
            void *wrapper = defined_in(m, name);
            return wrapper ? wrapper : found;
        }
    return found;
}

void *dlsym(void *handle, const char *name)
{
    if (!real_dlsym)
        find_real();
    /* The C library resolves these two from its caller's place: handed on
     * as a tail call, its caller is still the application's code. */
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT)
        return real_dlsym(handle, name);
    void *found = real_dlsym(handle, name);
    if (found && name && strncmp(name, "MPI_", 4) == 0)
        return counted(found, name, __builtin_return_address(0));
    return found;
}
