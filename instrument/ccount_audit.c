/* The call counter's dynamic-linker audit library (LD_AUDIT).
 *
 * The counting shim (ccount.c) sits ahead of the MPI library in the
 * global symbol scope, so every MPI_X found there reaches its wrapper.
 * Code that looks MPI_X up on the MPI library's own handle
 * (dlsym(dlopen("libmpi.so"), "MPI_Send"), which is what ctypes.CDLL and
 * cffi's dlopen do) gets libmpi's function directly and bypasses it.
 * The dynamic linker tells its auditors about every such binding,
 * dlsym included (la_symbind64); this one hands out the shim's wrapper
 * instead of libmpi's function, so those calls are counted too (as
 * invisible: their caller is not mpi4py).  Bindings made by the shim
 * itself (its PMPI_ calls) and by libmpi are left alone, as is any
 * function the shim does not wrap.
 */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>

static struct link_map *shim, *libmpi;

unsigned int la_version(unsigned int version)
{
    return version;
}

static int is_libmpi(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libmpi.", 7) == 0 || strncmp(base, "libmpi_", 7) == 0;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
    (void)lmid;
    *cookie = (uintptr_t)map;
    const char *name = map->l_name ? map->l_name : "";
    if (strstr(name, "repreplay_ccount")) {
        shim = map;
        return 0;                       /* its own bindings are not redirected */
    }
    if (is_libmpi(name)) {
        libmpi = map;
        return LA_FLG_BINDTO;
    }
    return LA_FLG_BINDFROM;
}

/* The address of the function ``name`` that ``m`` defines, from its
 * dynamic symbol table (the linker's own lookup is not for auditors to
 * call); 0 if it has none.  GNU ld puts .dynsym right before .dynstr. */
static uintptr_t defined_in(struct link_map *m, const char *name)
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
        return 0;
    for (const ElfW(Sym) *s = symtab; (const char *)(s + 1) <= strtab; s++)
        if (s->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
            strcmp(strtab + s->st_name, name) == 0)
            return m->l_addr + s->st_value;
    return 0;
}

uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook,
                       uintptr_t *defcook, unsigned int *flags, const char *symname)
{
    (void)ndx;
    (void)flags;
    if (shim && libmpi && (struct link_map *)*defcook == libmpi &&
        (struct link_map *)*refcook != shim && strncmp(symname, "MPI_", 4) == 0) {
        uintptr_t wrapper = defined_in(shim, symname);
        if (wrapper)
            return wrapper;
    }
    return sym->st_value;
}
