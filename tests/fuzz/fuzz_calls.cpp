// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer harness: random sequences of public calls with random arguments,
// random injected driver failures and sticky faults, against the driver
// double.  Invariants checked after every call:
//   - the status is one of the documented codes and, on failure, the last
//     error names an operation and carries a message;
//   - the thread's current CUDA context is exactly what the harness set;
//   - nothing crashes, hangs, leaks (ASan/LSan) or misbehaves (UBSan).
// Each input ends by releasing every handle it still owns.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "support/double_link.h"
#include "tenferro_gpu.h"

namespace {

struct Input {
    const uint8_t *p;
    size_t n;
    uint32_t next(uint32_t bound) {  // 0 .. bound-1, 0 once exhausted
        uint32_t v = 0;
        for (int i = 0; i < 2 && n; ++i, ++p, --n) v = (v << 8) | *p;
        return bound ? v % bound : v;
    }
};

const char *const kEntries[] = {
#define TF_DRIVER_ENTRY(name, version) #name,
#include "../../src/driver/driver_entries.inc"
#undef TF_DRIVER_ENTRY
    "*",
};
const int kCodes[] = {1, 2, 4, 34, 100, 101, 201, 400, 700, 719, 801, 999};

const tfd_api *D;
void *g_expected_context;
// Set by the log callback when the library reported that it could not put
// the caller's context back (an injected cuCtxSetCurrent failure): the one
// documented case where the thread's context may differ afterwards.
bool g_restore_reported;

void on_log(int32_t, const char *message, void *) {
    if (std::strstr(message, "restore the caller's CUDA context") ||
        std::strstr(message, "roll back a partial context activation"))
        g_restore_reported = true;
}

void check(tf_status st) {
    if (st < TF_OK || st > TF_ERROR_INTERNAL) abort();
    if (st == TF_ERROR_INTERNAL) abort();  // a bug by definition
    if (st != TF_OK && (!*tf_last_error_operation() || !*tf_last_error_message())) abort();
    if (g_restore_reported) {
        g_restore_reported = false;
        D->tfd_set_current(g_expected_context);  // the caller repairs its thread
    }
    if (D->tfd_current_context() != g_expected_context) abort();
}

int32_t callback_result;
int32_t callback(void *user_data) {
    auto *rt = static_cast<tf_runtime *>(user_data);
    void *stream = nullptr;
    // re-entry is allowed; its status is whatever the fuzzed state gives
    if (callback_result == 7) (void)tf_runtime_stream(rt, &stream);
    return callback_result;
}

struct Harness {
    Input in;
    std::vector<tf_runtime *> owned;  // one entry per reference the harness holds
    std::vector<void *> contexts;

    tf_runtime *pick() { return owned.empty() ? nullptr : owned[in.next(owned.size())]; }

    void create() {
        // A buffer larger than the struct, so a struct_size claiming more
        // (a newer caller) is still backed by memory; the tail is zero or not.
        alignas(8) unsigned char buf[128] = {0};
        tf_runtime_options &o = *reinterpret_cast<tf_runtime_options *>(buf);
        tf_runtime_options_init(&o, sizeof o);
        if (in.next(16) == 0) buf[sizeof o + in.next(8)] = 1;
        const uint32_t slot_choices[] = {0, 1, 2, 8, 256, 257, 0xffffffffu};
        o.stream_slots = slot_choices[in.next(7)];
        o.retirement_capacity = in.next(3) == 0 ? 0 : 1 + in.next(64);
        o.flags = in.next(8) == 0 ? 1 : 0;
        if (in.next(8) == 0) o.struct_size = in.next(sizeof buf + 1);
        tf_runtime *rt = nullptr;
        tf_status st = tf_runtime_new_with_options(static_cast<int32_t>(in.next(5)) - 1,
                                                   in.next(4) ? &o : nullptr, &rt);
        check(st);
        if (st == TF_OK) owned.push_back(rt);
    }

    void release_one() {
        if (owned.empty()) return;
        size_t i = in.next(owned.size());
        check(tf_runtime_release(owned[i]));
        owned.erase(owned.begin() + i);
    }

    void queries(tf_runtime *rt) {
        uint64_t u = 0;
        int32_t v = 0;
        void *p = nullptr;
        tf_device_properties props;
        tf_device_properties_init(&props, sizeof props);
        if (in.next(4) == 0) props.struct_size = in.next(sizeof props + 1);
        check(tf_runtime_identity(rt, in.next(8) ? &u : nullptr));
        check(tf_runtime_allocation_domain(rt, &u));
        check(tf_runtime_device_info(rt, &props));
        check(tf_runtime_supports(rt, static_cast<int32_t>(in.next(12)) - 2, &v));
        check(tf_runtime_primary_context(rt, &p));
        check(tf_runtime_slot_count(rt, &v));
        check(tf_runtime_current_slot(rt, &v));
    }

    void step() {
        tf_runtime *rt = pick();
        void *stream = nullptr;
        switch (in.next(14)) {
            case 0: create(); break;
            case 1:
                if (rt && tf_runtime_retain(rt) == TF_OK) owned.push_back(rt);
                break;
            case 2: release_one(); break;
            case 3: {
                tf_runtime *bound = nullptr;
                tf_status st =
                    tf_runtime_bind_slot(rt, static_cast<int32_t>(in.next(12)) - 2, &bound);
                check(st);
                if (st == TF_OK) owned.push_back(bound);
                break;
            }
            case 4:
                callback_result = static_cast<int32_t>(in.next(9)) - 1;
                check(tf_with_context(rt, in.next(10) ? callback : nullptr, rt));
                break;
            case 5: check(tf_runtime_stream(rt, &stream)); break;
            case 6:
                check(tf_runtime_slot_stream(rt, static_cast<int32_t>(in.next(12)) - 2, &stream));
                break;
            case 7: check(tf_runtime_sync(rt)); break;
            case 8: {
                const char *entry = kEntries[in.next(sizeof kEntries / sizeof kEntries[0])];
                int code = kCodes[in.next(sizeof kCodes / sizeof kCodes[0])];
                if (in.next(2))
                    D->tfd_fail(entry, 1 + in.next(4), code, in.next(3));
                else
                    D->tfd_fail_after(entry, 1 + in.next(4), code, 1 + in.next(2));
                break;
            }
            case 9: D->tfd_clear_faults(); break;
            case 10:
                if (rt) queries(rt);
                break;
            case 11: {
                int32_t n = 0;
                tf_device_properties props;
                tf_device_properties_init(&props, sizeof props);
                D->tfd_set_devices(static_cast<int>(in.next(4)));
                check(tf_device_count(in.next(8) ? &n : nullptr));
                check(tf_device_info(static_cast<int32_t>(in.next(6)) - 1, &props));
                D->tfd_set_devices(1 + static_cast<int>(in.next(3)));
                break;
            }
            case 12: {  // a sticky fault on a runtime's primary context
                void *ctx = nullptr;
                if (rt && tf_runtime_primary_context(rt, &ctx) == TF_OK && in.next(4) == 0)
                    D->tfd_poison_context(ctx, in.next(2) ? 700 : 719);
                break;
            }
            case 13: {  // the caller switches to another (or no) context
                if (contexts.empty() || in.next(2)) contexts.push_back(D->tfd_create_context(0));
                g_expected_context = in.next(3) ? contexts.back() : nullptr;
                D->tfd_set_current(g_expected_context);
                break;
            }
        }
    }

    void finish() {
        D->tfd_clear_faults();
        for (tf_runtime *rt : owned) check(tf_runtime_release(rt));
        owned.clear();
        D->tfd_set_current(nullptr);
        g_expected_context = nullptr;
        for (void *c : contexts) D->tfd_destroy_context(c);
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    D = tfd();
    if (!D) abort();  // the harness runs against the double only
    D->tfd_reset();
    D->tfd_set_current(nullptr);
    g_expected_context = nullptr;
    if (tf_set_log_callback(on_log, nullptr) != TF_OK) abort();
    Harness h{Input{data, size}, {}, {}};
    for (int ops = 0; h.in.n && ops < 200; ++ops) h.step();
    h.finish();
    return 0;
}
