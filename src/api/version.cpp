// SPDX-License-Identifier: MIT OR Apache-2.0
// Version of the loaded library.
#include "tenferro_gpu.h"

extern "C" {

TF_API uint32_t tf_version(void) { return TF_VERSION_NUMBER; }
TF_API const char *tf_version_string(void) { return TF_VERSION_STRING; }

}  // extern "C"
