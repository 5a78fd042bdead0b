/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Thread cancellation (pthread_cancel) held off for a section.
//
// Cancellation acted on at a cancellation point unwinds the thread's stack.
// Sections whose state lives on that stack while other threads use it (a
// staged download's copy jobs on the copy threads' board), or that must
// finish their bookkeeping while unwinding, run with cancellation disabled:
// a request that arrives meanwhile stays pending and is acted on at the
// thread's next cancellation point after the section.
#pragma once

#include <pthread.h>

namespace tf {

class DeferCancellation {
public:
    DeferCancellation() { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &previous_); }
    ~DeferCancellation() { pthread_setcancelstate(previous_, nullptr); }
    DeferCancellation(const DeferCancellation &) = delete;
    DeferCancellation &operator=(const DeferCancellation &) = delete;

private:
    int previous_ = PTHREAD_CANCEL_ENABLE;
};

}  // namespace tf
