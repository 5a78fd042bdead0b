/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// What a tf_program* points to: the outcome of one run-time compilation.
// It belongs to no runtime; its last release frees the log and the image.
#pragma once

#include <string>
#include <vector>

#include "runtime/handle.h"

namespace tf {
constexpr uint64_t kLiveProgram = 0x74665f70726f6731ull;  // "tf_prog1"
constexpr HandleKind kProgramKind{kLiveProgram, "program", TF_ERROR_INVALID_ARGUMENT, "a live"};
}  // namespace tf

struct tf_program : tf::Handle {
    tf_program() : Handle(tf::kLiveProgram, &tf::free_shell<tf_program>) {}

    std::string log;
    std::vector<char> image;  // empty when the source did not compile
};
