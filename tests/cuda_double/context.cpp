// SPDX-License-Identifier: MIT OR Apache-2.0
// Contexts: one primary context per device with a retain count, test-made
// non-primary contexts, the per-thread current context and peer access.
#include "context.h"

#include "entries.h"

namespace tfd {

Context &primary_context(int device)
{
    State &s = state();
    if (s.primary[device] == 0) {
        Context c;
        c.handle = make_handle(Tag::context);
        c.device = device;
        c.primary = true;
        s.primary[device] = c.handle;
        s.contexts[c.handle] = c;
    }
    return s.contexts[s.primary[device]];
}

uint64_t create_context(int device)
{
    Context c;
    c.handle = make_handle(Tag::context);
    c.device = device;
    State &s = state();
    s.contexts[c.handle] = c;
    ++s.live[TFD_CONTEXTS];
    return c.handle;
}

void destroy_context(uint64_t handle)
{
    State &s = state();
    auto it = s.contexts.find(handle);
    if (it == s.contexts.end() || it->second.primary)
        return;
    reclaim_context(it->second);
    s.contexts.erase(it);
    --s.live[TFD_CONTEXTS];
}

static CUresult retain_primary(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pctx == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    Context &c = primary_context(dev);
    ++c.refcount;
    *pctx = handle_ptr<CUcontext>(c.handle);
    return CUDA_SUCCESS;
}

// Dropping the last reference destroys the primary context's resources, as
// the real driver does; the handle itself stays valid for a later retain.
static CUresult release_primary(CUdevice dev)
{
    CUresult rc = need_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    Context &c = primary_context(dev);
    if (c.refcount == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (--c.refcount == 0)
        reclaim_context(c);
    return CUDA_SUCCESS;
}

CUresult entry::d_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    return run("cuDevicePrimaryCtxRetain", [&] { return retain_primary(pctx, dev); });
}

CUresult entry::d_cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return run("cuDevicePrimaryCtxRelease", [&] { return release_primary(dev); });
}

CUresult entry::d_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    return run("cuDevicePrimaryCtxGetState", [&] {
        CUresult rc = need_init();
        if (rc != CUDA_SUCCESS)
            return rc;
        if (!valid_device(dev))
            return CUDA_ERROR_INVALID_DEVICE;
        if (flags == nullptr || active == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        const Context &c = primary_context(dev);
        *flags = c.flags;
        *active = c.active() ? 1 : 0;
        return CUDA_SUCCESS;
    });
}

CUresult entry::d_cuCtxGetCurrent(CUcontext *pctx)
{
    return run("cuCtxGetCurrent", [&] {
        CUresult rc = need_init();
        if (rc != CUDA_SUCCESS)
            return rc;
        if (pctx == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        *pctx = handle_ptr<CUcontext>(current_handle());
        return CUDA_SUCCESS;
    });
}

// Any existing context may be made current, even an inactive primary one;
// calls that need a context then fail with CUDA_ERROR_INVALID_CONTEXT.
CUresult entry::d_cuCtxSetCurrent(CUcontext ctx)
{
    return run("cuCtxSetCurrent", [&] {
        CUresult rc = need_init();
        if (rc != CUDA_SUCCESS)
            return rc;
        if (ctx != nullptr && find_context(handle_of(ctx)) == nullptr)
            return CUDA_ERROR_INVALID_CONTEXT;
        set_current_handle(handle_of(ctx));
        return CUDA_SUCCESS;
    });
}

static CUresult enable_peer(CUcontext peer_ctx, unsigned int flags)
{
    Context *cur = nullptr;
    CUresult rc = need_context(&cur);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    Context *peer = find_context(handle_of(peer_ctx));
    if (peer == nullptr || !peer->active())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (peer->device == cur->device)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!state().devices[cur->device].peer[peer->device])
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (!cur->peers.insert(peer->handle).second)
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    return CUDA_SUCCESS;
}

CUresult entry::d_cuCtxEnablePeerAccess(CUcontext peer_ctx, unsigned int flags)
{
    return run("cuCtxEnablePeerAccess", [&] { return enable_peer(peer_ctx, flags); });
}

}  // namespace tfd
