/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Handles of objects that belong to one runtime (tf_event, tf_module,
// tf_graph).
//
// Each is a handle (runtime/handle.h) that holds a reference to its
// runtime's state, so the runtime (and its primary context) outlives it;
// its driver object is destroyed at its last release, with that context
// current, and the runtime reference is dropped after it.
#pragma once

#include <cuda.h>

#include <memory>

#include "runtime/handle.h"
#include "runtime/runtime_state.h"

namespace tf {

struct SharedObject : Handle {
    SharedObject(uint64_t tag, void (*free)(Handle *), std::shared_ptr<RuntimeState> s)
        : Handle(tag, free), state(std::move(s)) {}

    std::shared_ptr<RuntimeState> state;  // NULL once released
};

// At an object's last release: runs destroy() (which returns a CUresult)
// with the state's context current and logs a failure.  In a forked child
// or after a sticky fault nothing is called and the object leaks quietly.
// The thread's last error is left as it was.
template <class Destroy>
void destroy_in_context(RuntimeState &state, const char *call, Destroy destroy);

// Shared by destroy_in_context's instantiations: enters the context (false
// if it should not or cannot be) and logs a failed destroy.
bool enter_for_destroy(RuntimeState &state, class ContextScope *scope);
void log_destroy_failure(RuntimeState &state, const char *call, CUresult r);

}  // namespace tf

#include "driver/context_scope.h"
#include "util/error.h"

template <class Destroy>
void tf::destroy_in_context(RuntimeState &state, const char *call, Destroy destroy) {
    KeepLastError keep;  // a destroy's failure is logged, never the caller's
    ContextScope scope;
    if (enter_for_destroy(state, &scope)) {
        CUresult r = destroy();
        if (r != CUDA_SUCCESS) log_destroy_failure(state, call, r);
    }
}
