// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/slot_capture.h"

#include "runtime/event.h"

namespace tf {

CaptureContents::~CaptureContents() {
    for (tf_event *e : events) drop_event(e);
}

}  // namespace tf
