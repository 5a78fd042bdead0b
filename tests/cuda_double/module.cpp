// SPDX-License-Identifier: MIT OR Apache-2.0
// Modules and kernels.  An image is NUL-terminated PTX-like text; its
// ".entry NAME" lines declare kernels.  Only names the double knows as
// built-in fake kernels yield functions; any other name the image declares
// gives CUDA_ERROR_NO_BINARY_FOR_GPU, described as the list of built-ins
// (builtin_kernels.h), and a name it does not declare CUDA_ERROR_NOT_FOUND,
// as on a GPU.  A launch is checked at the call and
// queued on its stream (queue.h) with a copy of its parameters; the kernel
// runs on host memory when the stream runs it:
//   tfd_fill_u32(uint64_t dptr, uint32_t value, uint32_t n)
//   tfd_add_f32(uint64_t x, uint64_t y, uint64_t out, uint32_t n)
//   tfd_illegal_address()
//   tf_read_scalar(uint64_t src, uint64_t mailbox, uint32_t len, uint32_t seq)
//     the library's own kernel (src/transfer/scalar_read.cpp): len bytes
//     from src to mailbox, then seq into the 32-bit word at mailbox + 16,
//     all with release stores (the mailbox is mapped page-locked memory a
//     host thread spins on)
//   tf_bench_spin(uint64_t ns)   bench/bench_transfer's 20 us of work; the
//     double has no clock of device time: it does nothing
//   bench/bench_graph's conjugate-gradient kernels, on float arrays:
//   tf_bench_cg_dot(x, y, rr, out, n, mode)  s = x . y; mode 0: *out = *rr / s;
//     mode 1: *out = s / *rr, then *rr = s
//   tf_bench_cg_xr(x, r, p, ap, alpha, n)    x += *alpha p; r -= *alpha ap
//   tf_bench_cg_p(p, r, beta, n)             p = r + *beta p
// A kernel that touches memory outside a live allocation reachable from the
// launching context (its device, or a peer with access enabled) poisons that
// context with CUDA_ERROR_ILLEGAL_ADDRESS when it runs, like an asynchronous
// fault: the launch returns success and calls after the run fail (the call
// that made the stream run it included, when it is a synchronizing call).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "builtin_kernels.h"
#include "entries.h"
#include "state.h"

namespace tfd {

constexpr size_t kMaxImage = size_t(64) << 20;
constexpr int kMaxPtxVersion = 90;  // PTX ISA 9.0 (CUDA 13)

struct BuiltinKernel {
    const char *name;
    Kernel kernel;
    unsigned params;
};

static const BuiltinKernel kBuiltins[] = {
    {"tfd_fill_u32", Kernel::fill_u32, 3},
    {"tfd_add_f32", Kernel::add_f32, 4},
    {"tfd_illegal_address", Kernel::illegal_address, 0},
    {"tf_read_scalar", Kernel::read_scalar, 4},
    {"tf_bench_spin", Kernel::spin, 1},
    {"tf_bench_cg_dot", Kernel::cg_dot, 6},
    {"tf_bench_cg_xr", Kernel::cg_xr, 6},
    {"tf_bench_cg_p", Kernel::cg_p, 4},
};

static const BuiltinKernel *find_builtin(const std::string &name)
{
    for (const BuiltinKernel &b : kBuiltins)
        if (name == b.name)
            return &b;
    return nullptr;
}

const char *no_binary_for_gpu_text()
{
    static const std::string *text = [] {
        std::string names;
        for (const BuiltinKernel &b : kBuiltins)
            names += (names.empty() ? "" : ", ") + std::string(b.name);
        return new std::string(
            "no kernel image is available for execution on the device (the "
            "driver double runs only these kernels: " +
            names + ")");
    }();
    return text->c_str();
}

static const BuiltinKernel &builtin_of(Kernel k)
{
    for (const BuiltinKernel &b : kBuiltins)
        if (b.kernel == k)
            return b;
    return kBuiltins[0];
}

// ---- image parsing -------------------------------------------------------

struct Image {
    std::set<std::string> entries;
    int target = 0;   // NN of ".target sm_NN", 0 when absent
    int version = 0;  // 10*major+minor of ".version", 0 when absent
};

static bool is_text(const char *image, size_t *len)
{
    size_t n = 0;
    for (; n < kMaxImage && image[n] != '\0'; ++n) {
        unsigned char c = static_cast<unsigned char>(image[n]);
        if (c < 0x20 && c != '\n' && c != '\r' && c != '\t')
            return false;
        if (c >= 0x7f)
            return false;
    }
    *len = n;
    return n > 0 && n < kMaxImage;
}

static std::string next_token(const std::string &line, size_t *pos)
{
    size_t b = line.find_first_not_of(" \t\r", *pos);
    if (b == std::string::npos) {
        *pos = line.size();
        return std::string();
    }
    size_t e = line.find_first_of(" \t\r(", b);
    if (e == std::string::npos)
        e = line.size();
    *pos = e;
    return line.substr(b, e - b);
}

static void parse_line(const std::string &line, Image *img)
{
    size_t pos = 0;
    std::string tok = next_token(line, &pos);
    if (tok == ".visible" || tok == ".weak")
        tok = next_token(line, &pos);
    if (tok == ".entry") {
        std::string name = next_token(line, &pos);
        if (!name.empty())
            img->entries.insert(name);
    } else if (tok == ".target") {
        std::string t = next_token(line, &pos);
        if (t.compare(0, 3, "sm_") == 0)
            img->target = std::atoi(t.c_str() + 3);
    } else if (tok == ".version") {
        std::string v = next_token(line, &pos);
        int major = 0, minor = 0;
        if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) == 2)
            img->version = major * 10 + minor;
    }
}

// Parse an image; on failure returns the error and a one-line message.
static CUresult parse_image(const void *image, int device_cc, Image *img, std::string *msg)
{
    size_t len = 0;
    const char *text = static_cast<const char *>(image);
    if (!is_text(text, &len)) {
        *msg = "image is not a PTX text image";
        return CUDA_ERROR_INVALID_IMAGE;
    }
    std::string all(text, len);
    for (size_t b = 0; b < all.size();) {
        size_t e = all.find('\n', b);
        if (e == std::string::npos)
            e = all.size();
        parse_line(all.substr(b, e - b), img);
        b = e + 1;
    }
    if (img->entries.empty()) {
        *msg = "no .entry in image";
        return CUDA_ERROR_INVALID_IMAGE;
    }
    if (img->version > kMaxPtxVersion) {
        *msg = "Unsupported .version; current version is '9.0'";
        return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    }
    if (img->target > device_cc) {
        *msg = "SM version specified by .target is higher than the device's";
        return CUDA_ERROR_INVALID_PTX;
    }
    return CUDA_SUCCESS;
}

// ---- JIT options ---------------------------------------------------------

struct JitLogs {
    char *info = nullptr;
    char *error = nullptr;
    void **info_size = nullptr;  // option value slot: in capacity, out bytes written
    void **error_size = nullptr;
};

static CUresult read_options(unsigned n, CUjit_option *options, void **values, JitLogs *logs)
{
    if (n > 0 && (options == nullptr || values == nullptr))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; ++i) {
        int opt = raw_enum(options[i]);
        switch (opt) {
            case CU_JIT_INFO_LOG_BUFFER: logs->info = static_cast<char *>(values[i]); break;
            case CU_JIT_ERROR_LOG_BUFFER: logs->error = static_cast<char *>(values[i]); break;
            case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: logs->info_size = &values[i]; break;
            case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: logs->error_size = &values[i]; break;
            default:
                if (opt < 0 || opt >= CU_JIT_NUM_OPTIONS)
                    return CUDA_ERROR_INVALID_VALUE;
                break;  // accepted and ignored
        }
    }
    return CUDA_SUCCESS;
}

// Write `text` into a JIT log buffer whose capacity sits in *size_slot, and
// store back the bytes written (terminator included).
static void write_log(char *buf, void **size_slot, const std::string &text)
{
    if (buf == nullptr || size_slot == nullptr)
        return;
    size_t cap = static_cast<size_t>(reinterpret_cast<uintptr_t>(*size_slot));
    if (cap == 0)
        return;
    std::snprintf(buf, cap, "%s", text.c_str());
    size_t written = std::strlen(buf) + 1;
    *size_slot = reinterpret_cast<void *>(static_cast<uintptr_t>(written));
}

// ---- entry points ----------------------------------------------------------

static CUresult load_module(CUmodule *mod, const void *image, unsigned n, CUjit_option *options,
                            void **values)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (mod == nullptr || image == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    JitLogs logs;
    rc = read_options(n, options, values, &logs);
    if (rc != CUDA_SUCCESS)
        return rc;
    int cc = 10 * device_attribute(cur->device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
             device_attribute(cur->device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    Image img;
    std::string msg;
    rc = parse_image(image, cc, &img, &msg);
    if (rc != CUDA_SUCCESS) {
        write_log(logs.error, logs.error_size, "error   : " + msg);
        return rc;
    }
    write_log(logs.error, logs.error_size, "");
    write_log(logs.info, logs.info_size,
              "info    : tfd loaded " + std::to_string(img.entries.size()) + " entries");
    State &s = state();
    uint64_t h = make_handle(Tag::module);
    Module m;
    m.ctx = cur->handle;
    m.entries = img.entries;
    s.modules[h] = m;
    ++s.live[TFD_MODULES];
    *mod = handle_ptr<CUmodule>(h);
    return CUDA_SUCCESS;
}

// Module that must belong to the current context.
static CUresult find_module(CUmodule mod, const Context &cur, Module **out)
{
    auto &m = state().modules;
    auto it = m.find(handle_of(mod));
    if (mod == nullptr || it == m.end())
        return CUDA_ERROR_INVALID_HANDLE;
    if (it->second.ctx != cur.handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = &it->second;
    return CUDA_SUCCESS;
}

static CUresult get_function(CUfunction *fn, CUmodule mod, const char *name)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    Module *m = nullptr;
    if ((rc = find_module(mod, *cur, &m)) != CUDA_SUCCESS)
        return rc;
    if (fn == nullptr || name == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (m->entries.count(name) == 0)
        return CUDA_ERROR_NOT_FOUND;
    const BuiltinKernel *b = find_builtin(name);
    if (b == nullptr)
        return CUDA_ERROR_NO_BINARY_FOR_GPU;  // builtin_kernels.h
    auto known = m->functions.find(name);
    if (known != m->functions.end()) {
        *fn = handle_ptr<CUfunction>(known->second);
        return CUDA_SUCCESS;
    }
    uint64_t h = make_handle(Tag::function);
    Function f;
    f.module = handle_of(mod);
    f.ctx = cur->handle;
    f.kernel = b->kernel;
    state().functions[h] = f;
    m->functions[name] = h;
    *fn = handle_ptr<CUfunction>(h);
    return CUDA_SUCCESS;
}

static CUresult unload_module(CUmodule mod)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    Module *m = nullptr;
    if ((rc = find_module(mod, *cur, &m)) != CUDA_SUCCESS)
        return rc;
    State &s = state();
    for (const auto &f : m->functions)
        s.functions.erase(f.second);
    s.modules.erase(handle_of(mod));
    --s.live[TFD_MODULES];
    return CUDA_SUCCESS;
}

static CUresult find_function(CUfunction fn, const Context &cur, Function **out)
{
    auto &m = state().functions;
    auto it = m.find(handle_of(fn));
    if (fn == nullptr || it == m.end())
        return CUDA_ERROR_INVALID_HANDLE;
    if (it->second.ctx != cur.handle)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = &it->second;
    return CUDA_SUCCESS;
}

static bool attribute_value_ok(int attrib, int value)
{
    switch (attrib) {
        case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            return value >= 0 && value <= kMaxSharedOptin;
        case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return value >= -1 && value <= 100;
        default:
            // Read-only attributes cannot be set; cluster attributes are accepted.
            return attrib > CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT &&
                   attrib < CU_FUNC_ATTRIBUTE_MAX;
    }
}

static CUresult set_attribute(CUfunction fn, int attrib, int value)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    Function *f = nullptr;
    if ((rc = find_function(fn, *cur, &f)) != CUDA_SUCCESS)
        return rc;
    if (!attribute_value_ok(attrib, value))
        return CUDA_ERROR_INVALID_VALUE;
    f->attributes[attrib] = value;
    return CUDA_SUCCESS;
}

// ---- launches ----------------------------------------------------------------

struct Launch {
    unsigned grid[3];
    unsigned block[3];
    unsigned shared;
};

static bool launch_shape_ok(const Launch &l, const Function &f, int device)
{
    static const CUdevice_attribute grid_max[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                                   CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                                   CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
    static const CUdevice_attribute block_max[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                                    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                                    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
    uint64_t threads = 1;
    for (int i = 0; i < 3; ++i) {
        if (l.grid[i] < 1 || l.block[i] < 1)
            return false;
        if (l.grid[i] > unsigned(device_attribute(device, grid_max[i])) ||
            l.block[i] > unsigned(device_attribute(device, block_max[i])))
            return false;
        threads *= l.block[i];
    }
    if (threads > unsigned(device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)))
        return false;
    auto dyn = f.attributes.find(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    unsigned limit = dyn == f.attributes.end() ? kDefaultDynamicShared : unsigned(dyn->second);
    return l.shared <= limit;
}

// Host view of memory a kernel running in `cur` may touch, or nullptr.
static unsigned char *kernel_range(const Context &cur, uint64_t dptr, uint64_t bytes)
{
    uint64_t base = 0;
    DeviceAlloc *a = find_alloc(dptr, bytes == 0 ? 1 : bytes, &base);
    if (a == nullptr)
        return mapped_range(dptr, bytes == 0 ? 1 : bytes);  // reachable from every device
    bool reachable = a->device == cur.device;
    for (uint64_t peer : cur.peers) {
        const Context *p = find_context(peer);
        reachable = reachable || (p != nullptr && p->device == a->device);
    }
    return reachable ? a->host + (dptr - base) : nullptr;
}

// A launch's parameters, copied at the call as CUDA does: the caller may
// reuse its argument storage once cuLaunchKernel returns.
struct Args {
    uint64_t ptr[5] = {};
    uint32_t value = 0;
    uint32_t n = 0;
};

template <class T>
static T param(void **params, unsigned i)
{
    T v;
    std::memcpy(&v, params[i], sizeof v);
    return v;
}

static Args copy_args(Kernel k, void **params)
{
    Args a;
    if (k == Kernel::fill_u32) {
        a.ptr[0] = param<uint64_t>(params, 0);
        a.value = param<uint32_t>(params, 1);
        a.n = param<uint32_t>(params, 2);
    } else if (k == Kernel::add_f32) {
        for (unsigned i = 0; i < 3; ++i)
            a.ptr[i] = param<uint64_t>(params, i);
        a.n = param<uint32_t>(params, 3);
    } else if (k == Kernel::read_scalar) {
        a.ptr[0] = param<uint64_t>(params, 0);
        a.ptr[1] = param<uint64_t>(params, 1);
        a.n = param<uint32_t>(params, 2);
        a.value = param<uint32_t>(params, 3);
    } else if (k == Kernel::cg_dot || k == Kernel::cg_xr || k == Kernel::cg_p) {
        const unsigned ptrs = k == Kernel::cg_dot ? 4 : k == Kernel::cg_xr ? 5 : 3;
        for (unsigned i = 0; i < ptrs; ++i)
            a.ptr[i] = param<uint64_t>(params, i);
        a.n = param<uint32_t>(params, ptrs);
        if (k == Kernel::cg_dot)
            a.value = param<uint32_t>(params, 5);
    }
    return a;
}

// Float views of the conjugate-gradient kernels' arrays (n floats, or one
// for the scalars); false when one is outside reachable memory.
static bool floats(const Context &cur, const Args &args, unsigned count, const uint32_t *sizes,
                   float **out)
{
    for (unsigned i = 0; i < count; ++i) {
        out[i] = reinterpret_cast<float *>(kernel_range(cur, args.ptr[i], uint64_t(sizes[i]) * 4));
        if (out[i] == nullptr)
            return false;
    }
    return true;
}

static bool execute_cg(Kernel k, const Context &cur, const Args &args)
{
    const uint32_t n = args.n;
    float *v[5] = {};
    if (k == Kernel::cg_dot) {
        const uint32_t sizes[4] = {n, n, 1, 1};
        if (!floats(cur, args, 4, sizes, v))
            return false;
        float s = 0;
        for (uint32_t i = 0; i < n; ++i)
            s += v[0][i] * v[1][i];
        if (args.value == 0) {
            *v[3] = *v[2] / s;
        } else {
            *v[3] = s / *v[2];
            *v[2] = s;
        }
        return true;
    }
    if (k == Kernel::cg_xr) {
        const uint32_t sizes[5] = {n, n, n, n, 1};
        if (!floats(cur, args, 5, sizes, v))
            return false;
        for (uint32_t i = 0; i < n; ++i) {
            v[0][i] += *v[4] * v[2][i];
            v[1][i] -= *v[4] * v[3][i];
        }
        return true;
    }
    const uint32_t sizes[3] = {n, n, 1};
    if (!floats(cur, args, 3, sizes, v))
        return false;
    for (uint32_t i = 0; i < n; ++i)
        v[0][i] = v[1][i] + *v[2] * v[0][i];
    return true;
}

// Run a built-in kernel; returns false when it touched bad memory.
static bool execute(Kernel k, const Context &cur, const Args &args)
{
    if (k == Kernel::cg_dot || k == Kernel::cg_xr || k == Kernel::cg_p)
        return execute_cg(k, cur, args);
    if (k == Kernel::illegal_address)
        return false;
    if (k == Kernel::spin)
        return true;
    uint32_t n = args.n;
    if (k == Kernel::read_scalar) {
        const unsigned char *s = kernel_range(cur, args.ptr[0], n);
        unsigned char *box = kernel_range(cur, args.ptr[1], 20);
        if (s == nullptr || box == nullptr || n > 16)
            return false;
        for (uint32_t i = 0; i < n; ++i)
            __atomic_store_n(box + i, s[i], __ATOMIC_RELEASE);
        __atomic_store_n(reinterpret_cast<uint32_t *>(box + 16), args.value, __ATOMIC_RELEASE);
        return true;
    }
    if (k == Kernel::fill_u32) {
        unsigned char *d = kernel_range(cur, args.ptr[0], uint64_t(n) * 4);
        if (n != 0 && d == nullptr)
            return false;
        for (uint32_t i = 0; i < n; ++i)
            std::memcpy(d + 4 * uint64_t(i), &args.value, 4);
        return true;
    }
    if (n == 0)
        return true;
    unsigned char *x = kernel_range(cur, args.ptr[0], uint64_t(n) * 4);
    unsigned char *y = kernel_range(cur, args.ptr[1], uint64_t(n) * 4);
    unsigned char *out = kernel_range(cur, args.ptr[2], uint64_t(n) * 4);
    if (x == nullptr || y == nullptr || out == nullptr)
        return false;
    for (uint32_t i = 0; i < n; ++i) {
        float a, b;
        std::memcpy(&a, x + 4 * uint64_t(i), 4);
        std::memcpy(&b, y + 4 * uint64_t(i), 4);
        float c = a + b;
        std::memcpy(out + 4 * uint64_t(i), &c, 4);
    }
    return true;
}

static CUresult launch(CUfunction fn, const Launch &l, CUstream stream, void **params, void **extra)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    Function *f = nullptr;
    if ((rc = find_function(fn, *cur, &f)) != CUDA_SUCCESS)
        return rc;
    uint64_t key = 0;
    if ((rc = use_stream(stream, *cur, &key)) != CUDA_SUCCESS)
        return rc;
    if (!launch_shape_ok(l, *f, cur->device) || extra != nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const BuiltinKernel &b = builtin_of(f->kernel);
    if (b.params > 0 && params == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < b.params; ++i)
        if (params[i] == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
    Kernel k = f->kernel;
    Args args = copy_args(k, params);
    Op op;
    op.what = "cuLaunchKernel";
    op.body = [k, args](Context &ctx) {
        return execute(k, ctx, args) ? 0 : int(CUDA_ERROR_ILLEGAL_ADDRESS);
    };
    enqueue(key, cur->handle, std::move(op));
    return CUDA_SUCCESS;
}

CUresult entry::d_cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned int n,
                                     CUjit_option *options, void **values)
{
    return run("cuModuleLoadDataEx", [&] { return load_module(mod, image, n, options, values); });
}

CUresult entry::d_cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name)
{
    return run("cuModuleGetFunction", [&] { return get_function(fn, mod, name); });
}

CUresult entry::d_cuModuleUnload(CUmodule mod)
{
    return run("cuModuleUnload", [&] { return unload_module(mod); });
}

CUresult entry::d_cuFuncSetAttribute(CUfunction fn, CUfunction_attribute attrib, int value)
{
    return run("cuFuncSetAttribute", [&] { return set_attribute(fn, raw_enum(attrib), value); });
}

CUresult entry::d_cuLaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
                                 unsigned int bx, unsigned int by, unsigned int bz,
                                 unsigned int shared, CUstream stream, void **params, void **extra)
{
    Launch l = {{gx, gy, gz}, {bx, by, bz}, shared};
    return run("cuLaunchKernel", [&] { return launch(fn, l, stream, params, extra); });
}

}  // namespace tfd
