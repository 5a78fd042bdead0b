/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a tf_module* points to: a loaded driver module of one runtime.
#pragma once

#include <cuda.h>

#include <memory>

#include "runtime/shared_object.h"

namespace tf {
constexpr uint64_t kLiveModule = 0x74665f6d6f646c31ull;  // "tf_modl1"
constexpr HandleKind kModuleKind{kLiveModule, "module", TF_ERROR_INVALID_ARGUMENT, "a live"};
}  // namespace tf

struct tf_module : tf::SharedObject {
    explicit tf_module(std::shared_ptr<tf::RuntimeState> s)
        : SharedObject(tf::kLiveModule, &tf::free_shell<tf_module>, std::move(s)) {}

    CUmodule module = nullptr;
};
