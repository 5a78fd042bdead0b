// SPDX-License-Identifier: MIT OR Apache-2.0
// NVRTC double (libnvrtc.so.13).  "Compiling" a program:
//  * fails with NVRTC_ERROR_COMPILATION when the source has an #error
//    directive, logging "<name>(LINE): error: <text>" for each;
//  * otherwise produces PTX-like text the module double loads: .version 8.0,
//    .target sm_XX (from --gpu-architecture / -arch, default compute_90) and
//    one ".visible .entry NAME(" per __global__ function.
// Kernels not declared extern "C" (directly or inside an extern "C" block)
// get a C++ (mangled-looking) entry name, as with the real compiler, so a
// library that looks them up by their plain name fails here as it would on
// a GPU.  The mangling is an approximation: "_Z<len><name>" + "v".
//
// Programs are kept here, under the driver double's mutex; their count is
// reported as TFD_NVRTC_PROGRAMS.
#include <nvrtc.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "companion.h"

namespace tfd {
namespace {

constexpr int kDefaultArch = 90;
constexpr int kMinArch = 75;
constexpr int kMaxArch = 121;
constexpr uint64_t kProgramTag = uint64_t(0x9) << 60;

struct Program {
    std::string name;
    std::string source;
    bool compiled = false;
    bool real_arch = false;  // compiled for sm_XX (CUBIN available)
    std::string log;
    std::string ptx;
};

// Never destroyed (see the driver double's state).
std::map<uint64_t, Program> &programs()
{
    static auto *m = new std::map<uint64_t, Program>();
    return *m;
}

uint64_t next_handle()
{
    static uint64_t id = 1;
    return kProgramTag | (id++ << 4);
}

Program *find(nvrtcProgram prog)
{
    auto it = programs().find(reinterpret_cast<uintptr_t>(prog));
    return it == programs().end() ? nullptr : &it->second;
}

template <class Body>
nvrtcResult run(const char *entry, Body body)
{
    return run_companion(entry, NVRTC_ERROR_OUT_OF_MEMORY, NVRTC_ERROR_INTERNAL_ERROR, body);
}

// ---- options ---------------------------------------------------------------

struct Target {
    int arch = kDefaultArch;
    bool real = false;
};

// "compute_90", "sm_90", "sm_90a" -> arch and kind; false when malformed.
bool parse_arch(const std::string &v, Target *t)
{
    bool real = v.compare(0, 3, "sm_") == 0;
    bool virt = v.compare(0, 8, "compute_") == 0;
    if (!real && !virt)
        return false;
    const char *digits = v.c_str() + (real ? 3 : 8);
    char *end = nullptr;
    long arch = std::strtol(digits, &end, 10);
    if (end == digits || (*end != '\0' && std::strcmp(end, "a") != 0 && std::strcmp(end, "f") != 0))
        return false;
    if (arch < kMinArch || arch > kMaxArch)
        return false;
    t->arch = static_cast<int>(arch);
    t->real = real;
    return true;
}

// The value of an arch option, or nullptr if `opt` is not one.  The
// separate form ("-arch", "sm_90") takes the next option.
const char *arch_value(const char *const *opts, int n, int *i)
{
    static const char *const joined[] = {"--gpu-architecture=", "-arch="};
    for (const char *p : joined)
        if (std::strncmp(opts[*i], p, std::strlen(p)) == 0)
            return opts[*i] + std::strlen(p);
    if (std::strcmp(opts[*i], "-arch") == 0 || std::strcmp(opts[*i], "--gpu-architecture") == 0)
        return *i + 1 < n ? opts[++*i] : "";
    return nullptr;
}

nvrtcResult parse_options(int n, const char *const *opts, Target *t, std::string *log)
{
    for (int i = 0; i < n; ++i) {
        if (opts[i] == nullptr)
            return NVRTC_ERROR_INVALID_INPUT;
        const char *arch = arch_value(opts, n, &i);
        if (arch != nullptr && !parse_arch(arch, t)) {
            *log = "nvrtc: error: invalid value for --gpu-architecture (-arch)\n";
            return NVRTC_ERROR_INVALID_OPTION;
        }
        if (arch == nullptr && opts[i][0] != '-') {
            *log = std::string("nvrtc: error: unrecognized option ") + opts[i] + "\n";
            return NVRTC_ERROR_INVALID_OPTION;
        }
    }
    return NVRTC_SUCCESS;
}

// ---- source scanning ---------------------------------------------------------

// Comments replaced by spaces, newlines kept (so line numbers hold).
std::string strip_comments(const std::string &src)
{
    std::string out = src;
    for (size_t i = 0; i + 1 < out.size(); ++i) {
        if (out[i] == '/' && out[i + 1] == '/') {
            for (; i < out.size() && out[i] != '\n'; ++i)
                out[i] = ' ';
        } else if (out[i] == '/' && out[i + 1] == '*') {
            size_t end = out.find("*/", i + 2);
            end = end == std::string::npos ? out.size() : end + 2;
            for (; i < end; ++i)
                if (out[i] != '\n')
                    out[i] = ' ';
            --i;
        }
    }
    return out;
}

std::vector<std::string> lines_of(const std::string &text)
{
    std::vector<std::string> lines;
    size_t b = 0;
    while (b <= text.size()) {
        size_t e = text.find('\n', b);
        if (e == std::string::npos)
            e = text.size();
        lines.push_back(text.substr(b, e - b));
        b = e + 1;
    }
    return lines;
}

std::string trim(const std::string &s)
{
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos)
        return std::string();
    size_t e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

// Log lines for every "#error" directive; empty when there is none.
std::string error_directives(const Program &p, const std::string &text)
{
    std::string log;
    int errors = 0;
    std::vector<std::string> lines = lines_of(text);
    for (size_t i = 0; i < lines.size(); ++i) {
        std::string t = trim(lines[i]);
        if (t.empty() || t[0] != '#')
            continue;
        t = trim(t.substr(1));
        if (t.compare(0, 5, "error") != 0 ||
            (t.size() > 5 && !std::isspace(static_cast<unsigned char>(t[5]))))
            continue;
        log += p.name + "(" + std::to_string(i + 1) + "): error: " + trim(t.substr(5)) + "\n";
        ++errors;
    }
    if (errors > 0)
        log += "\n" + std::to_string(errors) + " error" + (errors > 1 ? "s" : "") +
               " detected in the compilation of \"" + p.name + "\".\n";
    return log;
}

bool ident_char(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

size_t skip_space(const std::string &s, size_t i)
{
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
        ++i;
    return i;
}

// Position after the parenthesised group starting at s[i] == '('.
size_t skip_parens(const std::string &s, size_t i)
{
    int depth = 0;
    for (; i < s.size(); ++i) {
        depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
        if (depth == 0)
            return i + 1;
    }
    return s.size();
}

// Name of the function declared after "__global__" at `i`, or "".
std::string kernel_name(const std::string &s, size_t i)
{
    std::string last;
    while (i < s.size()) {
        i = skip_space(s, i);
        if (i < s.size() && s[i] == '(') {
            if (last != "__launch_bounds__")
                return last;
            i = skip_parens(s, i);
            last.clear();
            continue;
        }
        size_t b = i;
        while (i < s.size() && ident_char(s[i]))
            ++i;
        if (i == b)
            return std::string();  // punctuation before any "(": not a kernel
        last = s.substr(b, i - b);
    }
    return std::string();
}

bool is_word_at(const std::string &s, size_t i, const char *word)
{
    size_t n = std::strlen(word);
    return s.compare(i, n, word) == 0 && (i == 0 || !ident_char(s[i - 1])) &&
           (i + n >= s.size() || !ident_char(s[i + n]));
}

struct Kernel {
    std::string name;
    bool c_linkage;
};

// Scan for __global__ functions, tracking extern "C" declarations and
// blocks by brace depth.
std::vector<Kernel> find_kernels(const std::string &s)
{
    std::vector<Kernel> out;
    std::vector<int> c_blocks;  // brace depths of open extern "C" { blocks
    int depth = 0;
    size_t decl_start = 0;  // start of the current declaration
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '{' || c == '}' || c == ';') {
            if (c == '{') {
                std::string head = trim(s.substr(decl_start, i - decl_start));
                const std::string ext = "extern \"C\"";
                if (head.size() >= ext.size() &&
                    head.compare(head.size() - ext.size(), ext.size(), ext) == 0)
                    c_blocks.push_back(depth);
                ++depth;
            } else if (c == '}') {
                --depth;
                if (!c_blocks.empty() && c_blocks.back() == depth)
                    c_blocks.pop_back();
            }
            decl_start = i + 1;
        } else if (is_word_at(s, i, "__global__")) {
            std::string head = s.substr(decl_start, i - decl_start);
            bool c_decl = head.find("extern \"C\"") != std::string::npos;
            std::string name = kernel_name(s, i + std::strlen("__global__"));
            if (!name.empty())
                out.push_back(Kernel{name, c_decl || !c_blocks.empty()});
        }
    }
    return out;
}

std::string entry_name(const Kernel &k)
{
    if (k.c_linkage)
        return k.name;
    return "_Z" + std::to_string(k.name.size()) + k.name + "v";
}

std::string make_ptx(const Program &p, const std::vector<Kernel> &kernels, int arch)
{
    std::string ptx = "//\n// Generated by the tenferro-gpu NVRTC double\n// Program: " + p.name +
                      "\n//\n\n.version 8.0\n.target sm_" + std::to_string(arch) +
                      "\n.address_size 64\n";
    for (const Kernel &k : kernels) {
        std::string name = entry_name(k);
        ptx += "\n\t// .globl\t" + name + "\n.visible .entry " + name + "(\n)\n{\n\tret;\n}\n";
    }
    return ptx;
}

nvrtcResult compile(Program &p, int n, const char *const *opts)
{
    if (n < 0 || (n > 0 && opts == nullptr))
        return NVRTC_ERROR_INVALID_INPUT;
    p.compiled = false;
    p.ptx.clear();
    p.log.clear();
    Target t;
    nvrtcResult rc = parse_options(n, opts, &t, &p.log);
    if (rc != NVRTC_SUCCESS)
        return rc;
    std::string text = strip_comments(p.source);
    p.log = error_directives(p, text);
    if (!p.log.empty())
        return NVRTC_ERROR_COMPILATION;
    p.ptx = make_ptx(p, find_kernels(text), t.arch);
    p.compiled = true;
    p.real_arch = t.real;
    return NVRTC_SUCCESS;
}

// Copy out a string and its size (terminator included).
nvrtcResult size_of(const std::string &s, size_t *out)
{
    if (out == nullptr)
        return NVRTC_ERROR_INVALID_INPUT;
    *out = s.size() + 1;
    return NVRTC_SUCCESS;
}

nvrtcResult copy_out(const std::string &s, char *out)
{
    if (out == nullptr)
        return NVRTC_ERROR_INVALID_INPUT;
    std::memcpy(out, s.c_str(), s.size() + 1);
    return NVRTC_SUCCESS;
}

// The program's PTX (want_cubin: its CUBIN) or an error code.
nvrtcResult output_of(nvrtcProgram prog, bool want_cubin, const std::string **out)
{
    Program *p = find(prog);
    if (p == nullptr || !p->compiled)
        return NVRTC_ERROR_INVALID_PROGRAM;
    if (want_cubin && !p->real_arch)
        return NVRTC_ERROR_INVALID_OPTION;
    *out = &p->ptx;
    return NVRTC_SUCCESS;
}

const char *const kResultNames[] = {
    "NVRTC_SUCCESS",
    "NVRTC_ERROR_OUT_OF_MEMORY",
    "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
    "NVRTC_ERROR_INVALID_INPUT",
    "NVRTC_ERROR_INVALID_PROGRAM",
    "NVRTC_ERROR_INVALID_OPTION",
    "NVRTC_ERROR_COMPILATION",
    "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
    "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
    "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
    "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
    "NVRTC_ERROR_INTERNAL_ERROR",
    "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
    "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
    "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
    "NVRTC_ERROR_PCH_CREATE",
    "NVRTC_ERROR_CANCELLED",
    "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
};

}  // namespace
}  // namespace tfd

using namespace tfd;

extern "C" {

// Cannot report a failure: an injected one makes it answer NULL.
const char *nvrtcGetErrorString(nvrtcResult result)
{
    if (tfd_enter("nvrtcGetErrorString") != 0)
        return nullptr;
    size_t n = sizeof kResultNames / sizeof kResultNames[0];
    int i = raw_enum(result);
    return i >= 0 && size_t(i) < n ? kResultNames[i] : "NVRTC_ERROR unknown";
}

nvrtcResult nvrtcVersion(int *major, int *minor)
{
    return run("nvrtcVersion", [&] {
        if (major == nullptr || minor == nullptr)
            return NVRTC_ERROR_INVALID_INPUT;
        *major = 13;
        *minor = 0;
        return NVRTC_SUCCESS;
    });
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                               int num_headers, const char *const *headers,
                               const char *const *include_names)
{
    return run("nvrtcCreateProgram", [&] {
        if (prog == nullptr)
            return NVRTC_ERROR_INVALID_PROGRAM;
        if (src == nullptr || num_headers < 0 ||
            (num_headers > 0 && (headers == nullptr || include_names == nullptr)))
            return NVRTC_ERROR_INVALID_INPUT;
        Program p;
        p.name = name != nullptr ? name : "default_program";
        p.source = src;
        uint64_t h = next_handle();
        programs()[h] = p;
        tfd_count_live(TFD_NVRTC_PROGRAMS, 1);
        *prog = reinterpret_cast<nvrtcProgram>(static_cast<uintptr_t>(h));
        return NVRTC_SUCCESS;
    });
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog)
{
    return run("nvrtcDestroyProgram", [&] {
        if (prog == nullptr || find(*prog) == nullptr)
            return NVRTC_ERROR_INVALID_PROGRAM;
        programs().erase(reinterpret_cast<uintptr_t>(*prog));
        tfd_count_live(TFD_NVRTC_PROGRAMS, -1);
        *prog = nullptr;
        return NVRTC_SUCCESS;
    });
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options, const char *const *options)
{
    return run("nvrtcCompileProgram", [&] {
        Program *p = find(prog);
        return p == nullptr ? NVRTC_ERROR_INVALID_PROGRAM : compile(*p, num_options, options);
    });
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size)
{
    return run("nvrtcGetProgramLogSize", [&] {
        Program *p = find(prog);
        return p == nullptr ? NVRTC_ERROR_INVALID_PROGRAM : size_of(p->log, size);
    });
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log)
{
    return run("nvrtcGetProgramLog", [&] {
        Program *p = find(prog);
        return p == nullptr ? NVRTC_ERROR_INVALID_PROGRAM : copy_out(p->log, log);
    });
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *size)
{
    return run("nvrtcGetPTXSize", [&] {
        const std::string *s = nullptr;
        nvrtcResult rc = output_of(prog, false, &s);
        return rc != NVRTC_SUCCESS ? rc : size_of(*s, size);
    });
}

nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx)
{
    return run("nvrtcGetPTX", [&] {
        const std::string *s = nullptr;
        nvrtcResult rc = output_of(prog, false, &s);
        return rc != NVRTC_SUCCESS ? rc : copy_out(*s, ptx);
    });
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size)
{
    return run("nvrtcGetCUBINSize", [&] {
        const std::string *s = nullptr;
        nvrtcResult rc = output_of(prog, true, &s);
        return rc != NVRTC_SUCCESS ? rc : size_of(*s, size);
    });
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin)
{
    return run("nvrtcGetCUBIN", [&] {
        const std::string *s = nullptr;
        nvrtcResult rc = output_of(prog, true, &s);
        return rc != NVRTC_SUCCESS ? rc : copy_out(*s, cubin);
    });
}

}  // extern "C"
