/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Loads the installed library by its SONAME the way a binding does (Python's
 * ctypes, Julia's Libdl, Rust's libloading, Go through cgo's dlopen) and
 * resolves every exported symbol.
 *
 *   dlopen_all SONAME SYMBOLS_FILE
 *
 * For RTLD_LAZY and RTLD_NOW, each with RTLD_LOCAL: dlopen(SONAME), dlsym of
 * every name in SYMBOLS_FILE (abi/symbols.txt, one a line), a call of
 * tf_version() through the resolved pointer, a check that the symbols stayed
 * local (not visible through RTLD_DEFAULT), and dlclose.  Prints the library's
 * path and the count; exits 1 on the first problem.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tenferro_gpu.h>

static int open_and_resolve(const char *soname, const char *symbols_path, int mode,
                            const char *mode_name) {
    char line[256];
    int resolved = 0;
    FILE *symbols;
    void *lib;
    /* A union, not a cast: ISO C has no conversion between void * and
     * function pointers, and this builds under -pedantic. */
    union {
        void *address;
        uint32_t (*fn)(void);
    } version;
    Dl_info where;

    lib = dlopen(soname, mode | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen_all: dlopen(%s, %s | RTLD_LOCAL): %s\n", soname, mode_name,
                dlerror());
        return 1;
    }
    symbols = fopen(symbols_path, "r");
    if (!symbols) {
        perror(symbols_path);
        dlclose(lib);
        return 1;
    }
    while (fgets(line, sizeof line, symbols)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        dlerror();
        if (!dlsym(lib, line)) {
            fprintf(stderr, "dlopen_all: %s: %s does not resolve: %s\n", mode_name, line,
                    dlerror());
            fclose(symbols);
            dlclose(lib);
            return 1;
        }
        if (dlsym(RTLD_DEFAULT, line)) {
            fprintf(stderr, "dlopen_all: %s leaked into the global scope despite RTLD_LOCAL\n",
                    line);
            fclose(symbols);
            dlclose(lib);
            return 1;
        }
        ++resolved;
    }
    fclose(symbols);
    version.address = dlsym(lib, "tf_version");
    if (!version.address || version.fn() != TF_VERSION_NUMBER) {
        fprintf(stderr, "dlopen_all: tf_version() through dlsym is not %d\n", TF_VERSION_NUMBER);
        dlclose(lib);
        return 1;
    }
    if (dladdr(version.address, &where) && where.dli_fname)
        printf("dlopen_all: %s | RTLD_LOCAL: %s: %d symbols resolved\n", mode_name, where.dli_fname,
               resolved);
    if (resolved == 0) {
        fprintf(stderr, "dlopen_all: %s lists no symbol\n", symbols_path);
        dlclose(lib);
        return 1;
    }
    if (dlclose(lib) != 0) {
        fprintf(stderr, "dlopen_all: dlclose: %s\n", dlerror());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dlopen_all SONAME SYMBOLS_FILE\n");
        return 2;
    }
    if (open_and_resolve(argv[1], argv[2], RTLD_LAZY, "RTLD_LAZY")) return 1;
    if (open_and_resolve(argv[1], argv[2], RTLD_NOW, "RTLD_NOW")) return 1;
    return 0;
}
