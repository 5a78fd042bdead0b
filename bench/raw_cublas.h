/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Raw cuBLAS for the benchmarks' baselines, from the SONAME the library
// loads (libcublas.so.13, else .12), so both sides call one cuBLAS instance.
#pragma once

#include <cublas_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bench {

using Sgemm = decltype(&cublasSgemm_v2);

// Types only: the functions come from dlsym.
struct RawCublas {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    Sgemm sgemm;
};

template <class Fn>
void cublas_symbol(void *lib, const char *name, Fn *out) {
    void *sym = dlsym(lib, name);
    if (!sym) {
        std::fprintf(stderr, "bench: cuBLAS lacks %s\n", name);
        std::exit(1);
    }
    std::memcpy(static_cast<void *>(out), &sym, sizeof sym);
}

inline RawCublas load_raw_cublas() {
    void *lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::fprintf(stderr, "bench: no cuBLAS: %s\n", dlerror());
        std::exit(1);
    }
    RawCublas c{};
    cublas_symbol(lib, "cublasCreate_v2", &c.create);
    cublas_symbol(lib, "cublasDestroy_v2", &c.destroy);
    cublas_symbol(lib, "cublasSetStream_v2", &c.set_stream);
    cublas_symbol(lib, "cublasSetWorkspace_v2", &c.set_workspace);
    cublas_symbol(lib, "cublasSgemm_v2", &c.sgemm);
    return c;
}

}  // namespace bench
