# SPDX-License-Identifier: MIT OR Apache-2.0
# Page-locked host memory and asynchronous copies: host_alloc arrays,
# host_register, download_async! / upload_async! and their events, the
# pool's stats and trim, and a library that lacks them.

# The double: the next cuStreamSynchronize fails with `code`, once.
fail_next_sync(code=999) = tfd_fail("cuStreamSynchronize", 1, code, 1)

# f(rt, s, buf) with a new Runtime(0) of `slots` slots, its Stream on
# `slot`, and a DeviceBuffer of 4096 bytes of `value` already on the
# device; all closed afterwards (the buffer unless free_buffer is false:
# a faulted runtime cannot free it).
function with_filled_stream(f, value; slots=1, slot=0, free_buffer=true)
    tfd_reset()
    Runtime(0; stream_slots=slots) do rt
        Stream(rt, slot) do s
            buf = DeviceBuffer(s, fill(UInt8(value), 4096))
            sync_stream(s)
            f(rt, s, buf)
            free_buffer && free(buf)
        end
    end
    return true
end

@testset "page-locked memory and asynchronous copies" begin
    @testset "host_alloc gives an Array the pool owns" begin
        DOUBLE && tfd_reset()
        Runtime(0) do rt
            before = host_stats(rt)
            @test before isa HostPoolStats
            a = host_alloc(rt, Float32, 1000, 2)          # 8000 bytes: class 8 KiB
            @test a isa Matrix{Float32} && size(a) == (1000, 2)
            s = host_stats(rt)
            @test s.blocks_in_use == before.blocks_in_use + 1
            @test s.bytes_in_use == before.bytes_in_use + 8192
            @test s.driver_allocations == before.driver_allocations + 1
            a .= 1
            @test sum(a) == 2000
            free(a)                                       # back to the pool now
            s = host_stats(rt)
            @test s.blocks_in_use == before.blocks_in_use && s.blocks_cached >= 1
            b = host_alloc(rt, UInt8, 5000)               # the cached block again
            @test host_stats(rt).driver_allocations == s.driver_allocations
            free(reshape(b, 1000, 5))                     # any array that starts at the block
            expect_error(() -> free(b), L.TF_ERROR_INVALID_ARGUMENT, "tf_host_free", "freed already")
            expect_error(() -> free(zeros(UInt8, 16)), L.TF_ERROR_INVALID_ARGUMENT, "tf_host_free",
                         "does not start at a live host_alloc block")
            host_trim(rt)
            s = host_stats(rt)
            @test s.blocks_cached == 0 && s.bytes_cached == 0
            expect_error(() -> host_alloc(rt, UInt8, 0), L.TF_ERROR_INVALID_ARGUMENT, "tf_host_alloc")
            expect_error(() -> host_alloc(rt, Any, 4), L.TF_ERROR_INVALID_ARGUMENT, "tf_host_alloc",
                         "not a bits type")
        end
    end

    @testset "a block keeps its runtime, and garbage collection frees it" begin
        if DOUBLE
            tfd_reset()
            rt = Runtime(0)
            a = host_alloc(rt, UInt8, 64)
            close(rt)
            @test tfd_primary_refcount(0) == 1
            a[1] = 7
            a = nothing
            for _ in 1:10
                GC.gc(true)
                tfd_primary_refcount(0) == 0 && break
                sleep(0.01)
            end
            @test tfd_primary_refcount(0) == 0
        end
    end

    @testset "asynchronous round trip" begin
        Runtime(0; stream_slots=2) do rt
            Stream(rt, 1) do s
                data = Float32.(1:256)
                DeviceBuffer{Float32}(s, 256) do buf
                    src = host_alloc(s, Float32, 256)
                    dst = host_alloc(s, Float32, 256)
                    src .= data
                    ev = upload_async!(buf, src)
                    @test ev isa Event
                    sync_event(ev)
                    @test isdone(ev)
                    close(ev)
                    dst .= 0
                    ev = download_async!(dst, buf)
                    sync_event(ev)
                    close(ev)
                    @test dst == data
                    ev = download_async!(s, dst, pointer(buf) + 4 * 100)
                    sync_event(ev)
                    close(ev)
                    @test dst[1:156] == data[101:256]
                    expect_error(() -> download_async!(zeros(Float32, 257), buf),
                                 L.TF_ERROR_INVALID_ARGUMENT, "tf_download_async", "more than the buffer's")
                    record_use(s, dst)
                    free(src)
                    free(dst)
                end
            end
        end
    end

    @testset "the copy is only queued until the stream runs it" begin
        if DOUBLE
            tfd_reset() # deferred execution: the stream runs when waited for
            Runtime(0) do rt
                Stream(rt, 0) do s
                    DeviceBuffer(s, Float32[1, 2, 3, 4]) do buf
                        sync_stream(s)
                        dst = host_alloc(s, Float32, 4)
                        dst .= 0
                        ev = download_async!(dst, buf)
                        @test !isdone(ev)
                        @test dst == zeros(Float32, 4)   # not written before it runs
                        free(dst)                         # safe: the pool waits
                        @test host_stats(s).pending_frees == 1
                        sync_event(ev)
                        close(ev)
                        sync_stream(s)
                        @test host_stats(s).pending_frees == 0
                    end
                end
            end
        end
    end

    @testset "untracked host memory is refused" begin
        Runtime(0) do rt
            DeviceBuffer{UInt8}(rt, 16) do buf
                expect_error(() -> download_async!(zeros(UInt8, 16), buf), L.TF_ERROR_INVALID_ARGUMENT,
                             "tf_download_async", "tf_host_alloc", "tf_host_register")
                expect_error(() -> upload_async!(buf, zeros(UInt8, 16)), L.TF_ERROR_INVALID_ARGUMENT,
                             "tf_upload_async", "tf_host_alloc", "tf_host_register")
            end
        end
    end

    @testset "registered arrays take asynchronous copies" begin
        Runtime(0) do rt
            data = rand(UInt8, 8192)
            out = zeros(UInt8, 8192)
            DeviceBuffer{UInt8}(rt, 8192) do buf
                host_register(rt, data) do reg
                    @test reg isa Registration && isopen(reg)
                    @test host_stats(rt).bytes_registered >= 8192
                    ev = upload_async!(buf, data)
                    sync_event(ev)
                    close(ev)
                    reg2 = host_register(rt, out)
                    ev = download_async!(out, buf)
                    sync_event(ev)
                    close(ev)
                    unregister(reg2)
                    unregister(reg2)                    # once only
                    @test !isopen(reg2)
                    expect_error(() -> host_register(rt, data), L.TF_ERROR_INVALID_ARGUMENT,
                                 "tf_host_register")    # overlaps
                end
            end
            @test out == data
            @test host_stats(rt).bytes_registered == 0
            expect_error(() -> host_register(rt, UInt8[]), L.TF_ERROR_INVALID_ARGUMENT, "tf_host_register")
        end
    end

    @testset "driver failures reach the caller" begin
        if DOUBLE
            tfd_reset()
            Runtime(0) do rt
                tfd_fail("cuMemHostAlloc", 1, 999, 1)
                expect_error(() -> host_alloc(rt, UInt8, 1 << 20), L.TF_ERROR_CUDA, "tf_host_alloc")
                tfd_fail("cuMemHostRegister", 1, 999, 1)
                expect_error(() -> host_register(rt, zeros(UInt8, 4096)), L.TF_ERROR_CUDA, "tf_host_register")
                DeviceBuffer{UInt8}(rt, 64) do buf
                    a = host_alloc(rt, UInt8, 64)
                    tfd_fail("cuMemcpyDtoHAsync", 1, 999, 1)
                    expect_error(() -> download_async!(a, buf), L.TF_ERROR_CUDA, "tf_download_async")
                    free(a)
                end
            end
            @test tfd_primary_refcount(0) == 0
        end
    end

    # From Julia 1.11 reshape and vec share the block's Memory without
    # keeping the Array host_alloc returned: the block must live until the
    # last of them is collected, not the first.
    @testset "a block lives as long as any array made of it" begin
        Runtime(0) do rt
            before = host_stats(rt).blocks_in_use
            a = host_alloc(rt, UInt8, 4096)
            m = reshape(a, 64, 64)
            v = vec(m)
            a = nothing
            m = nothing
            for _ in 1:3
                GC.gc(true)
            end
            @test host_stats(rt).blocks_in_use == before + 1   # v still holds the block
            v[end] = 0x7f
            @test v[end] == 0x7f
            v = nothing
            for _ in 1:20
                GC.gc(true)
                host_stats(rt).blocks_in_use == before && break
                sleep(0.01)
            end
            @test host_stats(rt).blocks_in_use == before
        end
    end

    # resize! may move a registered array's data (from Julia 1.11) or free
    # it (before): the registered memory must stay alive, and be the range
    # that unregister gives back.
    @testset "resize! cannot take a registered array's memory away" begin
        Runtime(0) do rt
            a = zeros(UInt8, 4096)
            reg = host_register(rt, a)
            if VERSION >= v"1.11"
                resize!(a, 1 << 20)                   # a moves; the registered memory stays with reg
                GC.gc(true)
            else
                @test_throws Exception resize!(a, 1 << 20)   # shared data cannot be resized
            end
            unregister(reg)                           # the range registered, wherever a is now
            @test !isopen(reg)
            @test host_stats(rt).bytes_registered == 0
        end
    end

    # A synchronous copy to or from page-locked memory whose stream wait
    # fails leaves the copy queued (the double keeps it until the stream
    # runs).  Freeing the memory at once must never let the stale copy reach
    # its next owner.
    @testset "a failed synchronous download never writes the next block" begin
        DOUBLE && with_filled_stream(0xcd) do rt, s, buf
            a = host_alloc(s, UInt8, 4096)
            fail_next_sync()
            expect_error(() -> download!(a, buf), L.TF_ERROR_CUDA, "tf_download", "cuStreamSynchronize")
            free(a)                                   # the pool keeps it from reuse
            @test host_stats(s).pending_frees == 1
            b = host_alloc(s, UInt8, 4096)
            b .= 0x11
            sync_stream(s)                            # runs the stale copy
            @test b[1] == 0x11                        # 0xcd before: it wrote the next block
            @test host_stats(s).pending_frees == 0
            free(b)
        end
    end

    @testset "a failed synchronous upload never reads the next block" begin
        DOUBLE && with_filled_stream(0x00) do rt, s, buf
            a = host_alloc(s, UInt8, 4096)
            a .= 0xcd
            fail_next_sync()
            expect_error(() -> upload!(buf, a), L.TF_ERROR_CUDA, "tf_upload", "cuStreamSynchronize")
            free(a)
            b = host_alloc(s, UInt8, 4096)
            b .= 0x11
            sync_stream(s)
            @test Vector(buf)[1] == 0xcd              # 0x11 before: it read the next block
            free(b)
        end
    end

    @testset "a failed synchronous download is waited for before unregistering" begin
        DOUBLE && with_filled_stream(0xcd) do rt, s, buf
            host = zeros(UInt8, 4096)
            reg = host_register(s, host)
            fail_next_sync()
            expect_error(() -> download!(host, buf), L.TF_ERROR_CUDA, "tf_download")
            unregister(reg)
            @test host[1] == 0xcd                     # the copy ran before the range was unregistered
        end
    end

    @testset "a range whose failed stream cannot be waited for stays registered" begin
        DOUBLE && Runtime(0) do owner
            with_filled_stream(0xcd) do other, s, buf
                host = zeros(UInt8, 4096)
                reg = host_register(owner, host)   # another runtime's range: other's pool cannot be told
                fail_next_sync()
                expect_error(() -> download!(host, buf), L.TF_ERROR_CUDA, "tf_download")
                fail_next_sync()
                expect_error(() -> unregister(reg), L.TF_ERROR_CUDA, "tf_host_unregister", "the range stays registered")
                @test isopen(reg) && host_stats(owner).bytes_registered == 4096
                unregister(reg)                     # the wait succeeds now: the copy ran
                @test host[1] == 0xcd
            end
        end
    end

    @testset "a block whose failed stream cannot be waited for is leaked" begin
        DOUBLE && with_filled_stream(0xcd; free_buffer=false) do rt, s, buf
            a = host_alloc(s, UInt8, 4096)
            fail_next_sync(700)                       # a sticky fault: the pool cannot be told
            expect_error(() -> download!(a, buf), L.TF_ERROR_DEVICE_FAULT, "tf_download")
            expect_error(() -> free(a), L.TF_ERROR_DEVICE_FAULT, "tf_host_free", "leaked on purpose")
            st = host_stats(s)
            @test st.blocks_in_use == 1 && st.blocks_cached == 0   # never reused
        end
    end

    @testset "another runtime's failed download is waited for at free" begin
        DOUBLE && Runtime(0) do owner
            with_filled_stream(0xcd; slots=2, slot=1) do other, s, buf
                a = host_alloc(owner, UInt8, 4096)
                fail_next_sync()
                expect_error(() -> download!(a, buf), L.TF_ERROR_CUDA, "tf_download")
                syncs = tfd_calls("cuStreamSynchronize")
                free(a)                               # waits for other's slot 1 first
                @test tfd_calls("cuStreamSynchronize") == syncs + 1
                b = host_alloc(owner, UInt8, 4096)
                b .= 0x11
                sync_stream(s)
                @test b[1] == 0x11
                free(b)
            end
        end
    end

    @testset "a library older than 1.1 refuses only these calls" begin
        Runtime(0) do rt
            push!(TenferroGPU._MISSING_FUNCTIONS, "tf_host_alloc", "tf_host_stats")
            try
                err = expect_error(() -> host_alloc(rt, UInt8, 64), L.TF_ERROR_NOT_SUPPORTED, "tf_host_alloc",
                                   "is too old: tf_host_alloc is new in 1.1")
                expect_error(() -> host_stats(rt), L.TF_ERROR_NOT_SUPPORTED, "tf_host_stats", "too old")
                @test runtime_identity(rt) != 0          # the rest works
            finally
                delete!(TenferroGPU._MISSING_FUNCTIONS, "tf_host_alloc")
                delete!(TenferroGPU._MISSING_FUNCTIONS, "tf_host_stats")
            end
            host_trim(rt)
        end
    end
end
