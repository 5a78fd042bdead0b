// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/runtime_handle.h"

namespace tf {

void release_runtime(tf_runtime *rt) {
    if (!drop_reference(rt)) return;
    std::shared_ptr<RuntimeState> state = std::move(rt->state);
    quarantine(rt);
    state.reset();  // the last reference tears the runtime down here
}

}  // namespace tf
