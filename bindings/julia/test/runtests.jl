# SPDX-License-Identifier: MIT OR Apache-2.0
# Tests of TenferroGPU, against the CUDA driver double (make check-julia, when
# a Julia toolchain is present) or a real GPU (TF_TEST_MODE=gpu).  The
# library is found through TENFERRO_GPU_LIBRARY or the loader path; the
# double's folder goes first on LD_LIBRARY_PATH, where a real libcuda.so.1
# would be found.
using Test
using Libdl
using TenferroGPU
const L = TenferroGPU.LibTenferro

# ---- the driver: the double's controls, or the real driver's context calls ----

const DRIVER = Ref{Ptr{Cvoid}}(C_NULL)
function driver()
    if DRIVER[] == C_NULL
        # The libcuda.so.1 the library loaded, whatever folder it came from.
        h = Libdl.dlopen("libcuda.so.1", Libdl.RTLD_NOLOAD | Libdl.RTLD_NOW; throw_error=false)
        h === nothing && (h = Libdl.dlopen("libcuda.so.1"; throw_error=false))
        h === nothing && return C_NULL
        DRIVER[] = h
    end
    return DRIVER[]
end
tfd(name) = driver() == C_NULL ? C_NULL : something(Libdl.dlsym(driver(), name; throw_error=false), C_NULL)
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
tfd_live(kind) = ccall(tfd(:tfd_live), Clong, (Cint,), kind)
tfd_primary_refcount(dev) = ccall(tfd(:tfd_primary_refcount), Cint, (Cint,), dev)
tfd_set_async_pending(on) = ccall(tfd(:tfd_set_async_pending), Cvoid, (Cint,), on)
tfd_set_execution(mode) = ccall(tfd(:tfd_set_execution), Cvoid, (Cint,), mode)
tfd_set_background_delay_us(us) = ccall(tfd(:tfd_set_background_delay_us), Cvoid, (Culong,), us)
tfd_drain_all() = ccall(tfd(:tfd_drain_all), Cvoid, ())
const TFD_EXEC_DEFERRED = 1
const TFD_EXEC_BACKGROUND = 2
const TFD_EVENTS = 1
const TFD_CUBLAS_HANDLES = 5

# A real driver entry point through cuGetProcAddress_v2 (flags 1: legacy
# stream, as the library asks); an error when it cannot be resolved.
function real_entry(name, version)
    gpa = tfd(:cuGetProcAddress_v2)
    gpa == C_NULL && error("the loaded libcuda.so.1 has no cuGetProcAddress_v2")
    fn = Ref{Ptr{Cvoid}}(C_NULL)
    r = ccall(gpa, Cint, (Cstring, Ref{Ptr{Cvoid}}, Cint, UInt64, Ptr{Cvoid}), name, fn, version, 1, C_NULL)
    r == 0 || error("cuGetProcAddress_v2($name, $version) answered $r")
    return fn[]
end

# The calling thread's current CUcontext: the double's record, or the real
# driver's cuCtxGetCurrent.  Never a silent C_NULL.
function current_context()
    DOUBLE && return ccall(tfd(:tfd_current_context), Ptr{Cvoid}, ())
    ctx = Ref{Ptr{Cvoid}}(C_NULL)
    r = ccall(real_entry("cuCtxGetCurrent", 4000), Cint, (Ref{Ptr{Cvoid}},), ctx)
    r == 0 || error("cuCtxGetCurrent answered $r")
    return ctx[]
end

const DOUBLE = is_double()
const MODE = get(ENV, "TF_TEST_MODE", "")
MODE == "double" && !DOUBLE && error("TF_TEST_MODE=double but the loaded libcuda.so.1 is not the double")
MODE == "gpu" && DOUBLE && error("TF_TEST_MODE=gpu but the loaded libcuda.so.1 is the double")
const HAVE_DEVICE = DOUBLE || gpu_available()
MODE == "gpu" && !HAVE_DEVICE && error("TF_TEST_MODE=gpu but no CUDA device is usable")
println(DOUBLE ? "TenferroGPU tests: against the CUDA driver double" :
        HAVE_DEVICE ? "TenferroGPU tests: against the real driver (injection tests skip)" :
        "TenferroGPU tests: no CUDA device; device tests skip")

# How blocking calls wait (TENFERRO_GPU_WAIT, else gc_safe from Julia 1.12,
# poll before).  The double's event queries make no progress in its default
# (deferred) mode, so waiting by polling would never end there: on the
# double the suite waits with blocking calls instead, except in the tests
# of polling (waiting.jl), which run the double's background thread.
const WAIT_MODE = TenferroGPU.wait_mode()
DOUBLE && WAIT_MODE === :poll && (TenferroGPU._WAIT_MODE[] = :block)
println("TenferroGPU tests: Julia $VERSION, $(Threads.nthreads()) threads, blocking calls wait with ",
        TenferroGPU.wait_mode(), DOUBLE && WAIT_MODE === :poll ? " (poll outside waiting.jl)" : "")

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

# A vendor library optional on a GPU machine (cuBLAS, NVRTC): present in
# the double and promised by TF_TEST_MODE=gpu, where its absence fails.
function have(rt, capability, what)
    supports(rt, capability) && return true
    (DOUBLE || !isempty(MODE)) && error("$what cannot be loaded (TF_TEST_MODE=$MODE)")
    @info "$what cannot be loaded here: its tests skip"
    return false
end

# C = alpha*op(A)*op(B) + beta*C, column-major, on the CPU.
function gemm_ref(ta, tb, alpha, A, B, beta, C)
    opA = ta == 'N' ? A : permutedims(A)
    opB = tb == 'N' ? B : permutedims(B)
    return alpha .* (opA * opB) .+ beta .* C
end

# Small integers and halves: float32 sums of them stay exact.
halves(seed, dims...) = reshape([Float64(((seed * 31 + i * 17) % 13) - 6) / 2 for i in 1:prod(dims)], dims...)

# Runs one GEMM of element type T through rt; returns C.
function device_gemm(rt, ::Type{T}, ta, tb, m, n, k, alpha, beta, A, B, C; device_scalars=false) where {T}
    a, b, c = DeviceBuffer(rt, vec(T.(A))), DeviceBuffer(rt, vec(T.(B))), DeviceBuffer(rt, vec(T.(C)))
    s = DeviceBuffer(rt, T[alpha, beta])
    try
        gemm! = T === Float32 ? sgemm! : dgemm!
        lda, ldb = size(A, 1), size(B, 1)
        cublas_enqueue(rt, device_scalars ? :device : :host) do cb
            if device_scalars
                gemm!(cb, ta, tb, m, n, k, pointer(s), a, lda, b, ldb, pointer(s) + sizeof(T), c, m)
            else
                gemm!(cb, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, m)
            end
        end
        return reshape(Vector(c), m, n)
    finally
        foreach(free, (a, b, c, s))
    end
end

const ADD_SOURCE = """
extern "C" __global__ void tfd_add_f32(const float *x, const float *y, float *out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
"""

function add_kernel(rt)
    prog = compile(rt, ADD_SOURCE; name="add.cu", options=["-default-device"])
    m = try
        KernelModule(rt, image(prog))
    finally
        close(prog)
    end
    return m, KernelFunction(m, "tfd_add_f32")
end

function check_add(rt, f, n, seed)
    xs, ys = Float32.(1:n) .+ Float32(seed), Float32.(n:-1:1) .* 0.5f0
    DeviceBuffer(rt, xs) do x
        DeviceBuffer(rt, ys) do y
            DeviceBuffer{Float32}(rt, n) do out
                launch_kernel(rt, f, x, y, out, UInt32(n); grid=cld(n, 256), block=256)
                @test Vector(out) == xs .+ ys
            end
        end
    end
end

@testset "TenferroGPU" begin
    include("names.jl")
    include("no_library.jl")

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

        @testset "runtime lifecycle and options" begin
            rt = Runtime(0; stream_slots=4)
            @test slot_count(rt) == 4
            @test device_info(rt) == device_info(0)
            @test primary_context(rt) != C_NULL
            @test supports(rt, L.TF_CAP_RAW_STREAM)
            @test !supports(rt, L.TF_CAP_PEER_COPY)
            other = retain(rt)
            bound = Stream(rt, 3)
            @test runtime_identity(other) == runtime_identity(rt) == runtime_identity(bound)
            @test allocation_domain(bound) == allocation_domain(rt) != runtime_identity(rt)
            @test current_slot(bound) == 3
            @test raw_stream(bound) == slot_stream(rt, 3) != C_NULL
            expect_error(() -> slot_stream(rt, 4), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_slot_stream", "slot 4")
            sync_stream(rt)
            close(rt)
            @test !isopen(rt)
            expect_error(() -> close(rt), L.TF_ERROR_INVALID_HANDLE, "tf_runtime_release", "already closed")
            expect_error(() -> sync_stream(rt), L.TF_ERROR_INVALID_HANDLE, "tf_runtime_sync", "closed")
            sync_stream(other) # still alive through the other references
            close(bound)
            close(other)
            DOUBLE && @test tfd_primary_refcount(0) == 0
            # Each constructor reports under its own name.
            expect_error(() -> Runtime(0; stream_slots=1000), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new_with_options", "stream_slots 1000")
            expect_error(() -> Runtime(0; download_threads=65), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new_with_options", "download_threads 65 is outside")
            expect_error(() -> Runtime(0; download_chunk_bytes=65537), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new_with_options", "download_chunk_bytes 65537")
            expect_error(() -> Runtime(0; stream_slots=-1), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new_with_options", "does not fit")
            expect_error(() -> Runtime(0; slots=2), L.TF_ERROR_INVALID_ARGUMENT,
                         "tf_runtime_new_with_options", "unknown option slots")
            # Every option reaches the library.
            Runtime(0; stream_slots=3, retirement_capacity=7, download_threads=2,
                    download_chunk_bytes=L.TF_MIN_DOWNLOAD_CHUNK_BYTES) do rt
                @test slot_count(rt) == 3
                @test retirement_stats(rt).capacity == 7
                n = 3 * L.TF_MIN_DOWNLOAD_CHUNK_BYTES ÷ 4 + 5
                v = rand(Float32, n)
                Stream(rt, 0) do w
                    DeviceBuffer(w, v) do b
                        @test Vector(b) == v
                    end
                end
            end
        end

        @testset "finalizers release exactly once" begin
            if DOUBLE
                tfd_reset()
                let rt = Runtime(0), closed = Runtime(0)
                    raw_stream(rt) # makes the task's stream, which rt's finalizer closes
                    Event(rt) # dropped: its finalizer releases it, then the runtime's
                    close(closed)
                end
                for _ in 1:20
                    GC.gc(true)
                    tfd_primary_refcount(0) == 0 && break
                end
                @test tfd_primary_refcount(0) == 0
                @test tfd_calls("cuDevicePrimaryCtxRelease") == 2
                @test tfd_live(TFD_EVENTS) == 0
            end
        end

        @testset "with_context" begin
            rt = Runtime(0; stream_slots=2)
            primary = primary_context(rt)
            before = current_context()
            result = with_context(rt) do
                @test current_context() == primary
                with_context(() -> :inner, rt)
            end
            @test result == :inner
            @test current_context() == before
            # An exception is rethrown after the context was restored; the
            # slot is free again.
            @test_throws ArgumentError("mine") with_context(() -> throw(ArgumentError("mine")), rt)
            @test current_context() == before
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

        @testset "transfers" begin
            Runtime(0; stream_slots=2) do rt
                w = Stream(rt, 1)
                # Every download path: the driver's (up to 64 KiB), pipelined
                # staging above, with a partial last chunk.
                for n in (1, 3, 1000, 16 * 1024, 16 * 1024 + 1, 3 * 2^20 + 7)
                    v = rand(Float32, n)
                    DeviceBuffer(w, v) do b
                        @test Vector(b) == v
                    end
                end
                for v in (Int8[-1, 2], UInt16[1, 65535], Int64[-2^40, 7], [3.25, -1e300],
                          ComplexF64[1 - 2im, -3.5 + 4im])
                    DeviceBuffer(w, v) do b
                        @test Vector(b) == v
                        @test download_scalar(eltype(v), w, pointer(b) + (length(v) - 1) * sizeof(eltype(v))) == v[end]
                    end
                end
                other = Runtime(0; stream_slots=2)
                o = Stream(other, 0)
                src = rand(Float32, 5000)
                x, y, z = DeviceBuffer(w, src), DeviceBuffer{Float32}(w, 5000), DeviceBuffer{Float32}(o, 5000)
                copyto!(y, x)
                @test peer_copy_available(w, o)
                peer_copy!(o, pointer(z), w, pointer(y), sizeof(y))
                sync_stream(w) # o's streams do not wait for w's copy
                @test Vector(z) == src
                foreach(free, (x, y, z))
                free(x) # a second free does nothing
                close(o)
                close(other)
                # Bad input: refused with the library's messages.
                @test alloc(w, 0) == DevicePtr(0)
                free(w, DevicePtr(0))
                expect_error(() -> alloc(w, -1), L.TF_ERROR_INVALID_ARGUMENT, "tf_alloc", "bytes -1 is negative")
                host = zeros(UInt8, 64)
                GC.@preserve host begin
                    addr = DevicePtr(UInt64(UInt(pointer(host, 9))))
                    err = expect_error(() -> download_scalar(UInt32, w, addr), L.TF_ERROR_INVALID_ARGUMENT,
                                       "tf_download_scalar", "0x" * string(addr.addr; base=16), "is not device memory")
                    @test err.call == "cuMemGetAddressRange" && err.code_domain == L.TF_CODE_CUDA
                end
                DeviceBuffer{UInt32}(w, 4) do b
                    expect_error(() -> download!(w, zeros(UInt32, 5), pointer(b)), L.TF_ERROR_INVALID_ARGUMENT,
                                 "tf_download", "crosses the end of its allocation")
                    expect_error(() -> upload!(b, zeros(UInt32, 5)), L.TF_ERROR_INVALID_ARGUMENT,
                                 "tf_upload", "do not fit")
                end
                close(w)
            end
        end

        @testset "cuBLAS" begin
            Runtime(0; stream_slots=2) do rt
                have(rt, L.TF_CAP_CUBLAS, "cuBLAS") || return
                w = Stream(rt, 1)
                @test cublas_version() >= 120000
                @test cublas_symbol("cublasSgemm_v2") != C_NULL
                expect_error(() -> cublas_symbol("malloc"), L.TF_ERROR_INVALID_ARGUMENT, "tf_cublas_symbol",
                             "'malloc' is not a cuBLAS symbol")
                # SGEMM and DGEMM agree with the CPU for every transpose
                # combination and both pointer modes.
                m, n, k = 37, 29, 45
                seed = 1
                for ta in ('N', 'T'), tb in ('N', 'T'), dev in (false, true)
                    seed += 1
                    A = ta == 'N' ? halves(seed, m, k) : halves(seed, k, m)
                    B = tb == 'N' ? halves(seed + 1, k, n) : halves(seed + 1, n, k)
                    C = halves(seed + 2, m, n)
                    want = gemm_ref(ta, tb, 1.5, A, B, -0.5, C)
                    @test device_gemm(w, Float32, ta, tb, m, n, k, 1.5, -0.5, A, B, C; device_scalars=dev) ≈ want rtol=1e-5
                    @test device_gemm(w, Float64, ta, tb, m, n, k, 1.5, -0.5, A, B, C; device_scalars=dev) ≈ want rtol=1e-12
                end
                # The body gets the slot's own handle and stream.
                handles = Ptr{Cvoid}[]
                for _ in 1:2
                    cublas_enqueue(w) do c
                        @test c.stream == slot_stream(rt, 1)
                        push!(handles, c.handle)
                    end
                end
                @test handles[1] == handles[2] != C_NULL
                DeviceBuffer{Float32}(w, 16) do c
                    # cuBLAS refuses lda < m: the library's error, with the status.
                    err = expect_error(L.TF_ERROR_PROVIDER, "tf_cublas_enqueue", "(7)") do
                        cublas_enqueue(cb -> sgemm!(cb, 'N', 'N', 4, 4, 4, 1, c, 1, c, 4, 0, c, 4), w)
                    end
                    @test err.code == 7 && err.code_domain == L.TF_CODE_CUBLAS
                    # Any other exception is rethrown as it is; the slot is free.
                    @test_throws ArgumentError("not cuBLAS") cublas_enqueue(_ -> throw(ArgumentError("not cuBLAS")), w)
                    @test cublas_enqueue(_ -> 42, w) == 42
                    # The wrong form for the pointer mode is refused before cuBLAS.
                    @test_throws TenferroError cublas_enqueue(cb -> sgemm!(cb, 'N', 'N', 1, 1, 1, 1, c, 1, c, 1, 0, c, 1), w, :device)
                    # A call that needs the slot it runs on is refused.
                    inner = cublas_enqueue(w) do _
                        try
                            cublas_enqueue(_ -> nothing, w)
                        catch e
                            e
                        end
                    end
                    @test inner isa TenferroError && inner.status == L.TF_ERROR_RUNTIME_STATE
                    kept = cublas_enqueue(identity, w)
                    @test_throws TenferroError sgemm!(kept, 'N', 'N', 1, 1, 1, 1, c, 1, c, 1, 0, c, 1)
                    expect_error(() -> cublas_enqueue(_ -> nothing, w, :sideways), L.TF_ERROR_INVALID_ARGUMENT,
                                 "tf_cublas_enqueue", "neither :host nor :device")
                end
                if DOUBLE
                    handles_before = tfd_live(TFD_CUBLAS_HANDLES)
                    Runtime(0; stream_slots=1) do fresh
                        tfd_fail("cublasCreate_v2", 1, 13, 1)
                        ran = Ref(false)
                        err = expect_error(() -> cublas_enqueue(_ -> (ran[] = true), fresh), L.TF_ERROR_PROVIDER,
                                           "tf_cublas_enqueue", "cublasCreate_v2")
                        @test !ran[] && err.code == 13
                        cublas_enqueue(_ -> (ran[] = true), fresh)
                        @test ran[] && tfd_live(TFD_CUBLAS_HANDLES) == handles_before + 1
                    end
                end
                close(w)
            end
        end

        @testset "stream work, slot_wait, events" begin
            Runtime(0; stream_slots=3) do rt
                w = Stream(rt, 2)
                primary = primary_context(rt)
                seen = stream_enqueue(w) do s
                    @test current_context() == primary
                    slot_wait(w, 0) # takes no slot lock: allowed here
                    s
                end
                @test seen == slot_stream(rt, 2)
                @test_throws ArgumentError("in a stream body") stream_enqueue(_ -> throw(ArgumentError("in a stream body")), w)
                inner = stream_enqueue(w) do _
                    try
                        stream_enqueue(_ -> nothing, w)
                    catch e
                        e
                    end
                end
                @test inner isa TenferroError && inner.status == L.TF_ERROR_RUNTIME_STATE
                expect_error(() -> slot_wait(w, 3), L.TF_ERROR_INVALID_ARGUMENT, "tf_slot_wait", "other_slot 3 is outside 0..2")

                producer, consumer = Stream(rt, 0), Stream(rt, 1)
                src = rand(Float32, 100_000)
                x, y = DeviceBuffer(producer, src), DeviceBuffer{Float32}(producer, length(src))
                sync_stream(producer) # the allocations, for the other slot
                copyto!(y, x)
                slot_wait(consumer, 0)
                @test download!(consumer, zeros(Float32, length(src)), pointer(y)) == src
                Event(rt) do ev
                    @test isdone(ev)
                    upload!(x, Float32[42])
                    device_copy!(producer, pointer(y), pointer(x), 4)
                    record!(producer, ev)
                    wait_event(consumer, ev)
                    @test download_scalar(Float32, consumer, pointer(y)) == 42
                    sync_event(ev)
                    @test isdone(ev)
                    clone = retain(ev)
                    close(ev)
                    sync_event(clone) # the clone's reference keeps it
                    expect_error(() -> sync_event(ev), L.TF_ERROR_INVALID_HANDLE, "tf_event_synchronize", "Event was closed")
                    close(clone)
                end
                foreach(free, (x, y))
                foreach(close, (w, producer, consumer))
            end
        end

        @testset "retirement" begin
            Runtime(0; stream_slots=2) do rt
                w = Stream(rt, 1)
                before = retirement_stats(rt)
                DOUBLE && tfd_set_async_pending(1)
                released = Threads.Atomic{Int}(0)
                buf = DeviceBuffer{Float32}(w, 1024)
                retire(w) do
                    Threads.atomic_add!(released, 1)
                    free(buf)
                end
                poll_retirements(w)
                DOUBLE && @test released[] == 0 # the device has not passed the event
                sync_stream(w)
                @test released[] == 1
                after = retirement_stats(rt)
                @test after.released == before.released + 1 && after.in_flight == 0 && after.leaked == 0
                DOUBLE && tfd_set_async_pending(0)
                retire(() -> error("a failing release"), w) # printed, contained
                sync_stream(w)
                close(w)
            end
        end

        @testset "kernels and NVRTC" begin
            Runtime(0; stream_slots=2) do rt
                have(rt, L.TF_CAP_RUNTIME_COMPILATION, "NVRTC") || return
                w = Stream(rt, 1)
                m, f = add_kernel(w)
                check_add(w, f, 1000, 1)
                check_add(w, f, 1, 2)
                set_attribute!(f, TenferroGPU.FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024)
                # Launch inside a stream body (no slot lock); n = 0 touches nothing.
                stream_enqueue(_ -> launch_kernel(w, f, DevicePtr(0), DevicePtr(0), DevicePtr(0), UInt32(0)), w)
                clone = retain(m)
                close(m)
                expect_error(() -> launch_kernel(w, f, DevicePtr(0), DevicePtr(0), DevicePtr(0), UInt32(0)),
                             L.TF_ERROR_INVALID_HANDLE, "tf_kernel_launch", "KernelModule was closed")
                check_add(w, KernelFunction(clone, "tfd_add_f32"), 300, 3)
                err = expect_error(() -> KernelFunction(clone, "no_such_kernel"), L.TF_ERROR_CUDA,
                                   "tf_module_function", "no kernel 'no_such_kernel'")
                @test err.call == "cuModuleGetFunction"
                close(clone)
                err = expect_error(() -> compile(w, "extern \"C\" __global__ void k() {}\n#error broken on purpose\n"),
                                   L.TF_ERROR_COMPILE, "tf_program_compile")
                @test err.code_domain == L.TF_CODE_NVRTC && occursin("broken on purpose", err.log)
                expect_error(() -> launch_kernel(w, f, "not bits"), L.TF_ERROR_INVALID_ARGUMENT, "tf_kernel_launch",
                             "is not a bits value")
                close(w)
            end
        end

        @testset "program references" begin
            Runtime(0) do rt
                have(rt, L.TF_CAP_RUNTIME_COMPILATION, "NVRTC") || return
                prog = compile(rt, ADD_SOURCE)
                img, ptr = image(prog), prog.ptr
                twin, third = retain(prog), copy(prog)
                @test twin isa Program && third isa Program && twin.ptr == third.ptr == ptr
                close(prog)
                expect_error(() -> close(prog), L.TF_ERROR_INVALID_HANDLE, "tf_program_release_checked",
                             "Program was already closed")
                expect_error(() -> retain(prog), L.TF_ERROR_INVALID_HANDLE, "tf_program_retain", "Program was closed")
                @test image(twin) == img
                close(twin)
                @test image(third) == img && program_log(third) isa String
                close(third)
                # The last close freed it: the library refuses the pointer now.
                @test L.tf_program_retain(ptr) == L.TF_ERROR_INVALID_HANDLE

                # Released behind the binding's back: close reports it, once.
                prog = compile(rt, ADD_SOURCE)
                L.tf_program_release(prog.ptr)
                expect_error(() -> close(prog), L.TF_ERROR_INVALID_HANDLE, "tf_program_release_checked",
                             "already released")
                @test !isopen(prog)

                # A 1.0 library: retain throws, close uses tf_program_release.
                prog = compile(rt, ADD_SOURCE)
                ptr = prog.ptr
                push!(TenferroGPU._MISSING_FUNCTIONS, "tf_program_retain", "tf_program_release_checked")
                try
                    expect_error(() -> retain(prog), L.TF_ERROR_NOT_SUPPORTED, "tf_program_retain",
                                 "is too old: tf_program_retain is new in 1.1")
                    close(prog)
                finally
                    delete!(TenferroGPU._MISSING_FUNCTIONS, "tf_program_retain")
                    delete!(TenferroGPU._MISSING_FUNCTIONS, "tf_program_release_checked")
                end
                @test L.tf_program_retain(ptr) == L.TF_ERROR_INVALID_HANDLE
            end
        end

        @testset "errors follow their task across threads" begin
            # Every task's failures carry its own values although all of them
            # fail on shared threads between which they move: queries,
            # transfers, slot_wait and cuBLAS bodies alike.
            Runtime(0; stream_slots=4) do rt
                cases = supports(rt, L.TF_CAP_CUBLAS) ? 4 : 3
                wrong = Threads.Atomic{Int}(0)
                @sync for g in 1:32
                    Threads.@spawn begin
                        host = zeros(UInt8, 201) # its addresses are this task's own
                        for k in 1:200
                            bad = 1000 + 200g + k
                            which = (g + k) % cases
                            addr = DevicePtr(UInt64(UInt(pointer(host, k))))
                            err = GC.@preserve host try
                                which == 0 && slot_stream(rt, bad)
                                which == 1 && download_scalar(UInt8, rt, addr)
                                which == 2 && slot_wait(rt, bad)
                                which == 3 && cublas_enqueue(_ -> throw(CublasError(bad)), rt)
                                nothing
                            catch e
                                e
                            end
                            want = which == 0 ? "tf_runtime_slot_stream: slot $bad is outside" :
                                   which == 1 ? "tf_download_scalar: src 0x$(string(addr.addr; base=16)) is not device memory" :
                                   which == 2 ? "tf_slot_wait: other_slot $bad is outside" :
                                   "tf_cublas_enqueue: cuBLAS callback failed: "
                            ok = err isa TenferroError && startswith(err.message, want) &&
                                 (which != 3 || (err.code == bad && occursin("($bad)", err.message)))
                            ok || Threads.atomic_add!(wrong, 1)
                            yield() # a point where the task may move to another thread
                        end
                    end
                end
                @test wrong[] == 0
            end
        end

        @testset "bound slots stay put across threads" begin
            Runtime(0; stream_slots=4) do rt
                cublas = supports(rt, L.TF_CAP_CUBLAS)
                streams = [slot_stream(rt, s) for s in 0:3]
                wrong = Threads.Atomic{Int}(0)
                released = Threads.Atomic{Int}(0)
                @sync for g in 0:31
                    Threads.@spawn Stream(rt, g % 4) do b
                        want = streams[g%4+1]
                        DeviceBuffer{UInt32}(b, 1) do cell
                            for k in 1:200
                                ok = current_slot(b) == g % 4 && raw_stream(b) == want
                                ok &= stream_enqueue(identity, b) == want
                                cublas && k % 8 == 0 && (ok &= cublas_enqueue(c -> c.stream, b) == want)
                                value = UInt32(g * 200 + k)
                                upload!(cell, [value])
                                ok &= download_scalar(UInt32, b, pointer(cell)) == value
                                k % 32 == 0 && retire(() -> Threads.atomic_add!(released, 1), b)
                                sync_stream(b)
                                ok || Threads.atomic_add!(wrong, 1)
                                yield()
                            end
                        end
                    end
                end
                @test wrong[] == 0
                @test released[] == 32 * 6 # every task's Sync ran its own slot's retirements
            end
        end

        @testset "many tasks doing mixed work" begin
            Runtime(0; stream_slots=6) do rt
                cublas = supports(rt, L.TF_CAP_CUBLAS)
                nvrtc = supports(rt, L.TF_CAP_RUNTIME_COMPILATION)
                m, f = nvrtc ? add_kernel(rt) : (nothing, nothing)
                wrong = Threads.Atomic{Int}(0)
                @sync for t in 0:23
                    Threads.@spawn Stream(rt, t % 6) do b
                        for step in 0:11
                            ok = try
                                kind = (t + step) % 4
                                if kind == 0 && cublas
                                    A, B, C = halves(t, 24, 33), halves(step, 33, 17), halves(t + step, 24, 17)
                                    device_gemm(b, Float32, 'N', 'N', 24, 17, 33, 1.5, -0.5, A, B, C) ≈
                                        gemm_ref('N', 'N', 1.5, A, B, -0.5, C)
                                elseif kind == 1 && nvrtc
                                    n = 500 + 37t
                                    xs = rand(Float32, n)
                                    DeviceBuffer(b, xs) do x
                                        launch_kernel(b, f, x, x, x, UInt32(n); grid=cld(n, 128), block=128)
                                        Vector(x) == xs .+ xs
                                    end
                                elseif kind == 2
                                    v = rand(Float32, 300_000 + 1000t)
                                    DeviceBuffer(b, v) do x
                                        DeviceBuffer{Float32}(b, length(v)) do y
                                            copyto!(y, x)
                                            Vector(y) == v
                                        end
                                    end
                                else
                                    x = DeviceBuffer(b, [Float64(t * 100 + step)])
                                    got = download_scalar(Float64, b, pointer(x))
                                    retire(() -> free(x), b) # freed once the slot passed the read
                                    got == t * 100 + step
                                end
                            catch e
                                @error "task $t step $step" exception = e
                                false
                            end
                            ok || Threads.atomic_add!(wrong, 1)
                        end
                        sync_stream(b)
                    end
                end
                @test wrong[] == 0
                m === nothing || close(m)
            end
        end

        include("streams.jl")
        include("host.jl")
        include("memory_pool.jl")
        include("graphs.jl")
        include("waiting.jl")
        include("backtraces.jl")
        include("cuda_ext.jl")

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
