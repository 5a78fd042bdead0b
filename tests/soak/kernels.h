/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// The kernel every runtime of the soak loads: PTX the driver compiles, and
// the same in CUDA C++ for NVRTC.  Both define extern "C"
// tfd_fill_u32(u64 dst, u32 value, u32 n), which the driver double also
// knows (and runs on its host memory).
#pragma once

namespace soak {

// tfd_fill_u32(dst, value, n): dst[i] = value for i < n, one thread each.
inline constexpr char kFillPtx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry tfd_fill_u32(\n"
    "    .param .u64 p_dst,\n"
    "    .param .u32 p_value,\n"
    "    .param .u32 p_n\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<6>;\n"
    "\n"
    "    ld.param.u64 %rd1, [p_dst];\n"
    "    ld.param.u32 %r1, [p_value];\n"
    "    ld.param.u32 %r2, [p_n];\n"
    "    mov.u32 %r3, %ctaid.x;\n"
    "    mov.u32 %r4, %ntid.x;\n"
    "    mov.u32 %r5, %tid.x;\n"
    "    mad.lo.s32 %r6, %r3, %r4, %r5;\n"
    "    setp.ge.u32 %p1, %r6, %r2;\n"
    "    @%p1 bra DONE;\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    mul.wide.u32 %rd3, %r6, 4;\n"
    "    add.s64 %rd4, %rd2, %rd3;\n"
    "    st.global.u32 [%rd4], %r1;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

inline constexpr char kFillSource[] =
    "extern \"C\" __global__ void tfd_fill_u32(unsigned long long dst, unsigned value,\n"
    "                                        unsigned n) {\n"
    "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) reinterpret_cast<unsigned *>(dst)[i] = value;\n"
    "}\n";

}  // namespace soak
