// What a tf_module* points to: a loaded driver module of one runtime.
#pragma once

#include <cuda.h>

#include "runtime/shared_object.h"

struct tf_module {
    tf::SharedObject base;
    CUmodule module = nullptr;
};
