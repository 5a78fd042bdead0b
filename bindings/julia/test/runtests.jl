# Tests of TenferroGPU, against the CUDA driver double (make check-julia, when
# a Julia toolchain is present) or a real GPU.  The library is found through
# TENFERRO_GPU_LIBRARY or the loader path; the double's folder goes first on
# LD_LIBRARY_PATH, where a real libcuda.so.1 would be found.
using Test
using Libdl
using TenferroGPU
const L = TenferroGPU.LibTenferro

# The double's control interface (tests/cuda_double/tfd_control.h), or
# nothing against the real driver.
const DRIVER = Ref{Ptr{Cvoid}}(C_NULL)
function tfd(name)
    if DRIVER[] == C_NULL
        h = Libdl.dlopen("libcuda.so.1"; throw_error=false)
        h === nothing && return C_NULL
        DRIVER[] = h
    end
    return something(Libdl.dlsym(DRIVER[], name; throw_error=false), C_NULL)
end
function is_double()
    try
        device_count() # loads the driver, if there is one
    catch
    end
    return tfd(:tfd_reset) != C_NULL
end
tfd_reset() = ccall(tfd(:tfd_reset), Cvoid, ())
tfd_fail(entry, nth, code, times) =
    ccall(tfd(:tfd_fail), Cvoid, (Cstring, Culong, Cint, Culong), entry, nth, code, times)
tfd_calls(entry) = ccall(tfd(:tfd_calls), Culong, (Cstring,), entry)
tfd_primary_refcount(dev) = ccall(tfd(:tfd_primary_refcount), Cint, (Cint,), dev)
tfd_current_context() = ccall(tfd(:tfd_current_context), Ptr{Cvoid}, ())

const DOUBLE = is_double()
if get(ENV, "TF_TEST_MODE", "") == "double" && !DOUBLE
    error("TF_TEST_MODE=double but the loaded libcuda.so.1 is not the double")
end
const HAVE_DEVICE = DOUBLE || gpu_available()
println(DOUBLE ? "TenferroGPU tests: against the CUDA driver double" :
        HAVE_DEVICE ? "TenferroGPU tests: against the real driver (injection tests skip)" :
        "TenferroGPU tests: no CUDA device; device tests skip")

function expect_error(f, status, operation, fragments...)
    err = try
        f()
        nothing
    catch e
        e
    end
    @test err isa TenferroError
    err isa TenferroError || return err
    @test err.status == status
    @test err.operation == operation
    @test startswith(err.message, operation * ": ")
    for frag in fragments
        @test occursin(frag, err.message)
    end
    return err
end

@testset "TenferroGPU" begin
    @testset "version and statuses" begin
        @test version() == VersionNumber(TenferroGPU.version_string())
        @test version().major == L.TF_VERSION_MAJOR
        @test status_string(L.TF_ERROR_INVALID_ARGUMENT) == "invalid argument"
        @test status_string(12345) == "unknown status"
    end

    if HAVE_DEVICE
        DOUBLE && tfd_reset()
        @testset "devices" begin
            n = device_count()
            @test n >= 1
            d = device_info(0)
            @test d.ordinal == 0 && !isempty(d.name) && d.total_memory_bytes > 0
            expect_error(() -> device_info(-1), L.TF_ERROR_INVALID_ARGUMENT, "tf_device_info")
            expect_error(() -> device_info(n + 40), L.TF_ERROR_DEVICE_UNAVAILABLE, "tf_device_info")
            expect_error(() -> device_info(2^40), L.TF_ERROR_INVALID_ARGUMENT, "tf_device_info",
                         "does not fit in int32_t")
        end

        @testset "runtime lifecycle" begin
            rt = Runtime(0; stream_slots=4)
            @test slot_count(rt) == 4
            @test device(rt) == device_info(0)
            @test primary_context(rt) != C_NULL
            @test supports(rt, L.TF_CAP_RAW_STREAM)
            @test !supports(rt, L.TF_CAP_PEER_COPY)
            other = retain(rt)
            bound = bind_slot(rt, 3)
            @test runtime_identity(other) == runtime_identity(rt) == runtime_identity(bound)
            @test allocation_domain(bound) == allocation_domain(rt) != runtime_identity(rt)
            @test current_slot(bound) == 3
            @test stream(bound) == slot_stream(rt, 3) != C_NULL
            expect_error(() -> slot_stream(rt, 4), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_slot_stream", "slot 4")
            synchronize(rt)
            close(rt)
            @test !isopen(rt)
            expect_error(() -> close(rt), L.TF_ERROR_INVALID_HANDLE, "tf_runtime_release", "already closed")
            expect_error(() -> synchronize(rt), L.TF_ERROR_INVALID_HANDLE, "tf_runtime_sync", "closed")
            synchronize(other) # still alive through the other references
            close(bound)
            close(other)
            DOUBLE && @test tfd_primary_refcount(0) == 0
            expect_error(() -> Runtime(0; stream_slots=1000), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new", "stream_slots 1000")
            expect_error(() -> Runtime(0; stream_slots=-1), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new_with_options", "does not fit")
        end

        @testset "finalizer releases exactly once" begin
            if DOUBLE
                tfd_reset()
                let rt = Runtime(0), closed = Runtime(0)
                    stream(rt)
                    close(closed)
                end
                for _ in 1:20
                    GC.gc(true)
                    tfd_primary_refcount(0) == 0 && break
                end
                @test tfd_primary_refcount(0) == 0
                @test tfd_calls("cuDevicePrimaryCtxRelease") == 2
            end
        end

        @testset "with_context" begin
            rt = Runtime(0; stream_slots=2)
            primary = primary_context(rt)
            result = with_context(rt) do
                DOUBLE && @test tfd_current_context() == primary
                with_context(() -> :inner, rt)
            end
            @test result == :inner
            DOUBLE && @test tfd_current_context() == C_NULL
            # An exception is rethrown after the context was restored; the
            # slot is free again.
            @test_throws ArgumentError("mine") with_context(() -> throw(ArgumentError("mine")), rt)
            DOUBLE && @test tfd_current_context() == C_NULL
            @test with_context(() -> 1, rt) == 1
            if DOUBLE
                tfd_fail("cuCtxSetCurrent", 1, 999, 1)
                ran = Ref(false)
                err = expect_error(() -> with_context(() -> (ran[] = true), rt), L.TF_ERROR_CUDA,
                                   "tf_with_context", "cuCtxSetCurrent")
                @test !ran[] && err.code == 999 && err.call == "cuCtxSetCurrent"
            end
            close(rt)
        end

        @testset "errors follow their task across threads" begin
            rt = Runtime(0; stream_slots=4)
            wrong = Threads.Atomic{Int}(0)
            @sync for g in 1:32
                Threads.@spawn for k in 1:200
                    bad = 1000 + 200g + k
                    try
                        slot_stream(rt, bad)
                        Threads.atomic_add!(wrong, 1)
                    catch e
                        e isa TenferroError && occursin("slot $bad is outside", e.message) ||
                            Threads.atomic_add!(wrong, 1)
                    end
                    yield() # a point where the task may move to another thread
                end
            end
            @test wrong[] == 0
            close(rt)
        end

        @testset "bound slots stay put across threads" begin
            rt = Runtime(0; stream_slots=4)
            streams = [slot_stream(rt, s) for s in 0:3]
            wrong = Threads.Atomic{Int}(0)
            @sync for g in 0:31
                Threads.@spawn begin
                    b = bind_slot(rt, g % 4)
                    for _ in 1:200
                        (current_slot(b) == g % 4 && stream(b) == streams[g%4+1]) ||
                            Threads.atomic_add!(wrong, 1)
                        synchronize(b)
                        yield()
                    end
                    close(b)
                end
            end
            @test wrong[] == 0
            close(rt)
        end

        @testset "log callback" begin
            if DOUBLE
                tfd_reset()
                lines = String[]
                inner = Ref{Any}(nothing)
                set_log_callback() do level, message
                    push!(lines, message)
                    inner[] === nothing && (inner[] = try
                        set_log_callback(nothing)
                    catch e
                        e
                    end)
                end
                rt = Runtime(0; stream_slots=2)
                slot_stream(rt, 1)
                tfd_fail("cuStreamSynchronize", 1, 702, 1)
                close(rt)
                set_log_callback(nothing)
                @test any(l -> occursin("CUDA_ERROR_LAUNCH_TIMEOUT (702)", l), lines)
                @test inner[] isa TenferroError && inner[].status == L.TF_ERROR_RUNTIME_STATE
            end
        end
    else
        @info "no CUDA device: device tests skipped"
    end
end
