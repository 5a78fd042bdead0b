# SPDX-License-Identifier: MIT OR Apache-2.0
# The device's memory pool: statistics, peak reset, trim, the memory
# options, and uses of a buffer on another stream, recorded by the
# binding's own calls or by hand.

const MIB = 1 << 20
const TFD_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115 # CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
tfd_set_attribute(dev, attribute, value) =
    ccall(tfd(:tfd_set_attribute), Cvoid, (Cint, Cint, Cint), dev, attribute, value)

consistent(s::MemoryStats) = s.in_use_bytes <= s.reserved_bytes <= s.reserved_peak &&
                             s.in_use_bytes <= s.in_use_peak && s.frees <= s.allocations

# Slot 1 writes 3 (1.5 + 1.5) over x, a buffer of slot 0, with `write`
# (against the double deferred: it runs at slot 1's sync); x is freed on
# slot 0 and the pool hands its memory to y on slot 0, filled with 7.
# Returns what y holds once both slots ran: 7 when the free waited for
# slot 1's work, 3 when that work landed in y.
function free_while_slot_1_writes(write)
    n = 1024
    Runtime(0; stream_slots=2) do rt
        Stream(rt, 0) do s0
            Stream(rt, 1) do s1
                m, f = add_kernel(s1)
                src = DeviceBuffer(s1, fill(1.5f0, n))
                x = DeviceBuffer{Float32}(s0, n)
                address = pointer(x)
                write(s1, f, src, x)
                free(x)
                y = DeviceBuffer(s0, fill(7.0f0, n))
                @test pointer(y) == address # the pool handed x's memory out again
                sync_stream(s0)
                sync_stream(s1)
                back = Vector(y)
                @test all(==(back[1]), back)
                foreach(free, (y, src))
                close(m)
                back[1]
            end
        end
    end
end

@testset "the device memory pool" begin
    @testset "memory_stats count allocations, peaks and trims" begin
        DOUBLE && tfd_reset()
        Runtime(0; stream_slots=4) do rt
            Stream(rt, 0) do s0
                before = memory_stats(rt)
                @test before isa MemoryStats && consistent(before)
                @test (before.release_threshold, before.reserved_limit) == (L.TF_DEFAULT_MEMORY_RELEASE_THRESHOLD, 0)
                big = DeviceBuffer{UInt8}(s0, MIB)
                small = DeviceBuffer{UInt32}(s0, 1024)
                s = memory_stats(rt)
                @test consistent(s)
                @test s.cached == supports(rt, L.TF_CAP_STREAM_ORDERED_ALLOC)
                @test s.in_use_bytes == before.in_use_bytes + MIB + 4096
                @test (s.allocations, s.frees) == (before.allocations + 2, before.frees)
                free(big)
                sync_stream(s0)
                after = memory_stats(s0)
                @test (after.in_use_bytes, after.frees) == (s.in_use_bytes - MIB, s.frees + 1)
                @test after.in_use_peak >= s.in_use_bytes
                @test Runtime(memory_stats, 0) == after # the device's counters
                reset_peak_memory_stats(rt)
                reset = memory_stats(rt)
                @test (reset.in_use_peak, reset.reserved_peak) == (reset.in_use_bytes, reset.reserved_bytes)
                trim_memory(rt)
                trimmed = memory_stats(rt)
                @test consistent(trimmed)
                @test trimmed.trims == reset.trims + trimmed.cached
                @test trimmed.reserved_bytes <= reset.reserved_bytes
                DOUBLE && @test trimmed.reserved_bytes == trimmed.in_use_bytes # the double keeps nothing
                expect_error(() -> trim_memory(rt, -1), L.TF_ERROR_INVALID_ARGUMENT, "tf_memory_trim", "negative")
                free(small)
            end
        end
    end

    if DOUBLE
        @testset "without memory pools the stats say uncached" begin
            tfd_reset()
            tfd_set_attribute(0, TFD_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0)
            try
                Runtime(0; stream_slots=2) do rt
                    DeviceBuffer{UInt8}(rt, 4096) do buf
                        s = memory_stats(rt)
                        @test !s.cached && s.in_use_bytes == 4096 && s.reserved_bytes == s.in_use_bytes
                        trim_memory(rt) # nothing to give back
                        @test memory_stats(rt).trims == 0
                        Stream(s1 -> record_use(s1, buf), rt, 1) # checks the address only
                    end
                end
            finally
                tfd_reset()
            end
        end
    end

    @testset "the memory options reach the device's pool" begin
        DOUBLE && tfd_reset()
        Runtime(0; memory_release_threshold=MIB, memory_reserved_limit=64MIB) do rt
            if !supports(rt, L.TF_CAP_STREAM_ORDERED_ALLOC)
                @info "the device has no memory pools: its options are not shown"
                return
            end
            s = memory_stats(rt)
            @test (s.release_threshold, s.reserved_limit) == (MIB, 64MIB)
            expect_error(() -> Runtime(0; memory_reserved_limit=128MIB), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new_with_options", "memory_reserved_limit 134217728 differs from the 67108864")
            @test Runtime(r -> memory_stats(r).reserved_limit, 0; stream_slots=2) == 64MIB
            Stream(rt, 0) do s0
                six = DeviceBuffer{UInt8}(s0, 48MIB)
                expect_error(() -> DeviceBuffer{UInt8}(s0, 32MIB), L.TF_ERROR_OUT_OF_MEMORY, "tf_alloc",
                             "memory_reserved_limit")
                s = memory_stats(rt)
                @test (s.oom_retries, s.oom_failures) == (1, 1)
                free(six)
            end
        end
        expect_error(() -> Runtime(0; memory_reserved_limit=4096), L.TF_ERROR_INVALID_ARGUMENT,
                     "tf_runtime_new_with_options", "below TF_MIN_MEMORY_RESERVED_LIMIT")
        expect_error(() -> Runtime(0; memory_reserved_limit=-1), L.TF_ERROR_INVALID_ARGUMENT,
                     "tf_runtime_new_with_options", "does not fit in UInt64")
        # Once the device's runtimes are gone, a new pool takes new options.
        @test Runtime(r -> memory_stats(r).reserved_limit, 0; memory_reserved_limit=128MIB) == 128MIB
    end

    @testset "record_use checks its address" begin
        DOUBLE && tfd_reset()
        Runtime(0; stream_slots=2) do rt
            Stream(rt, 0) do s0
                Stream(rt, 1) do s1
                    DeviceBuffer{UInt64}(s0, 8) do buf
                        record_use(s1, buf)
                        record_use(s1, pointer(buf) + 63) # its last byte
                        DeviceBuffer{UInt8}(e -> record_use(s1, e), s0, 0) # empty: nothing to record
                        expect_error(() -> record_use(rt, DevicePtr(0)), L.TF_ERROR_INVALID_ARGUMENT,
                                     "tf_memory_record_use")
                        expect_error(() -> record_use(s1, pointer(buf) + 64), L.TF_ERROR_INVALID_ARGUMENT,
                                     "tf_memory_record_use", "is not inside a live tf_alloc() allocation")
                    end
                end
            end
        end
    end

    if DOUBLE
        @testset "a buffer used on another stream is freed after that work" begin
            tfd_reset()
            n = UInt32(1024)
            launch(s1, f, src, x) = launch_kernel(s1, f, src, src, x, n; grid=4, block=256)
            raw(s1, f, src, x) = launch_kernel(s1, f, pointer(src), pointer(src), pointer(x), n; grid=4, block=256)
            # launch_kernel records its DeviceBuffer arguments ...
            @test free_while_slot_1_writes(launch) == 7
            # ... which the double shows is needed: raw addresses are not
            # recorded, and slot 1's late write lands in the next buffer ...
            @test free_while_slot_1_writes(raw) == 3
            # ... unless recorded by hand.
            @test free_while_slot_1_writes((s1, f, src, x) -> (raw(s1, f, src, x); record_use(s1, x))) == 7
        end

        @testset "the binding records only buffers of other streams" begin
            tfd_reset()
            Runtime(0; stream_slots=2) do rt
                Stream(rt, 0) do s0
                    Stream(rt, 1) do s1
                        Stream(rt, 0) do same_slot
                            m, f = add_kernel(rt)
                            theirs = DeviceBuffer(s1, fill(2.0f0, 64))
                            # `use(by, mine)` queues work with a fresh buffer of
                            # s0 on `by`; the event records its free then makes.
                            function events_at_free(use, by)
                                mine = DeviceBuffer(s0, fill(1.0f0, 64))
                                sync_stream(s0)
                                use(by, mine)
                                before = tfd_calls("cuEventRecord")
                                free(mine)
                                return tfd_calls("cuEventRecord") - before
                            end
                            launch(by, mine) = launch_kernel(by, f, theirs, theirs, mine, UInt32(64); grid=1, block=64)
                            copy_from(by, mine) = DeviceBuffer{Float32}(t -> copyto!(t, mine), by, 64)
                            for (what, use) in (("launch_kernel", launch), ("copyto! from", copy_from))
                                @test events_at_free(use, s1) == 1          # another slot
                                @test events_at_free(use, s0) == 0          # its own stream
                                @test events_at_free(use, same_slot) == 0   # another handle of its slot
                            end
                            sync_stream(s1)
                            free(theirs)
                            close(m)
                        end
                    end
                end
            end
        end

        @testset "a 1.1 library: the pool's calls say they are too old" begin
            tfd_reset()
            Runtime(0) do rt
                missing_fns = ("tf_memory_pool_stats_init", "tf_memory_stats", "tf_memory_reset_peak",
                               "tf_memory_trim", "tf_memory_record_use")
                push!(TenferroGPU._MISSING_FUNCTIONS, missing_fns...)
                try
                    expect_error(() -> memory_stats(rt), L.TF_ERROR_NOT_SUPPORTED, "tf_memory_stats",
                                 "is too old: tf_memory_stats is new in 1.2")
                    expect_error(() -> reset_peak_memory_stats(rt), L.TF_ERROR_NOT_SUPPORTED, "tf_memory_reset_peak")
                    expect_error(() -> trim_memory(rt), L.TF_ERROR_NOT_SUPPORTED, "tf_memory_trim")
                    DeviceBuffer{Float32}(rt, 4) do b
                        expect_error(() -> record_use(rt, b), L.TF_ERROR_NOT_SUPPORTED, "tf_memory_record_use")
                        Stream(rt, 1) do s1
                            DeviceBuffer{Float32}(s1, 4) do other
                                copyto!(b, other) # of another stream: records nothing here, and goes on
                                sync_stream(rt)
                            end
                        end
                    end
                finally
                    foreach(f -> delete!(TenferroGPU._MISSING_FUNCTIONS, f), missing_fns)
                end
            end
        end
    end
end
