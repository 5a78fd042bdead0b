// What a tf_event* points to: a driver event of one runtime.
#pragma once

#include <cuda.h>

#include "runtime/shared_object.h"

struct tf_event {
    tf::SharedObject base;
    CUevent event = nullptr;
};
