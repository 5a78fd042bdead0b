# SPDX-License-Identifier: MIT OR Apache-2.0
# Graph capture: capture_graph's do-block, launches, updates, references,
# and what a failed capture leaves (the double breaks each call in turn).

const GRAPH_N = 256
const TFD_GRAPHS = 8
const TFD_GRAPH_EXECS = 9
tfd_capture_nodes(stream) = ccall(tfd(:tfd_capture_nodes), Culong, (Ptr{Cvoid},), stream)

# f(rt, s, add, x, y, out): a runtime of 4 slots, its Stream on slot 0, the
# add kernel, x = 1, y = 0.5, out = 0 on the device; all released after.
function with_graph_setup(f)
    DOUBLE && tfd_reset()
    Runtime(0; stream_slots=4) do rt
        Stream(rt, 0) do s
            m, add = add_kernel(s)
            x, y, out = (DeviceBuffer(s, fill(v, GRAPH_N)) for v in (1.0f0, 0.5f0, 0.0f0))
            sync_stream(s)
            try
                f(rt, s, add, x, y, out)
            finally
                foreach(free, (x, y, out))
                close(m)
            end
        end
    end
end

add_on(q, add, x, y, out) = launch_kernel(q, add, x, y, out, UInt32(GRAPH_N); grid=1, block=GRAPH_N)

function refused(f, operation)
    err = expect_error(f, L.TF_ERROR_RUNTIME_STATE, operation, "capturing a graph")
    return err
end

@testset "graph capture" begin
    @testset "captured work runs at each launch, and only then" begin
        with_graph_setup() do rt, s, add, x, y, out
            DeviceBuffer(s, zeros(Float32, GRAPH_N)) do copied
                g = capture_graph(s) do c
                    @test c === s
                    add_on(c, add, x, y, out)
                    copyto!(copied, out)
                end
                @test g isa KernelGraph
                @test all(==(0), Vector(copied)) # captured, not run
                launch_graph(g, s)
                @test all(==(1.5f0), Vector(copied))
                upload!(x, fill(-3.0f0, GRAPH_N)) # each launch runs on what memory holds then
                launch_graph(g, s)
                @test all(==(-2.5f0), Vector(copied))
                Stream(rt, 1) do other # on another slot, ordered by slot waits
                    upload!(x, fill(7.0f0, GRAPH_N))
                    slot_wait(other, 0)
                    launch_graph(g, other)
                    slot_wait(s, 1)
                    @test all(==(7.5f0), Vector(copied))
                end
                close(g)
            end
        end
    end

    @testset "calls that wait are refused inside a capture, which goes on" begin
        with_graph_setup() do rt, s, add, x, y, out
            DeviceBuffer(s, zeros(Float32, GRAPH_N)) do copied
                earlier = capture_graph(c -> add_on(c, add, x, y, out), s)
                Stream(rt, 1) do other
                    elsewhere = DeviceBuffer(other, UInt32[5, 5, 5, 5])
                    g = capture_graph(s) do c
                        add_on(c, add, x, y, out)
                        refused(() -> sync_stream(c), "tf_runtime_sync")
                        refused(() -> Vector(out), "tf_download")
                        refused(() -> download_scalar(Float32, c, pointer(out)), "tf_download_scalar")
                        refused(() -> upload!(out, Float32[1, 2]), "tf_upload")
                        refused(() -> poll_retirements(c), "tf_workspace_poll")
                        refused(() -> launch_graph(earlier, c), "tf_graph_launch")
                        tmp = alloc(c, 64)  # a temporary freed inside is the graph's own
                        free(c, tmp)
                        expect_error(() -> capture_graph(_ -> error("never runs"), c), L.TF_ERROR_RUNTIME_STATE,
                                     "tf_graph_capture_begin")
                        @test Vector(elsewhere) == UInt32[5, 5, 5, 5] # other slots work as usual
                        copyto!(copied, out) # captured after the refusals
                    end
                    launch_graph(g, s)
                    @test all(==(1.5f0), Vector(copied))
                    foreach(close, (g, earlier))
                    free(elsewhere)
                end
            end
        end
    end

    @testset "an exception aborts the capture and is rethrown" begin
        with_graph_setup() do rt, s, add, x, y, out
            graphs = DOUBLE ? tfd_live(TFD_GRAPHS) : 0
            err = try
                capture_graph(s) do c
                    add_on(c, add, x, y, out)
                    error("inside the capture")
                end
                nothing
            catch e
                e
            end
            @test err isa ErrorException && err.msg == "inside the capture"
            sync_stream(s) # no capture is open
            @test all(==(0), Vector(out)) # the aborted work never ran
            if DOUBLE
                @test tfd_capture_nodes(raw_stream(s)) == 0
                @test tfd_live(TFD_GRAPHS) == graphs
            end
            # The task's stream of a Runtime captures too.
            g = capture_graph(c -> add_on(c, add, x, y, out), rt)
            launch_graph(g, rt)
            sync_stream(rt)
            @test all(==(1.5f0), Vector(out))
            close(g)
        end
    end

    @testset "an update is in place for the same shape, anew for another" begin
        with_graph_setup() do rt, s, add, x, y, out
            x2, out2, copied = (DeviceBuffer(s, fill(v, GRAPH_N)) for v in (10.0f0, 0.0f0, 0.0f0))
            g = capture_graph(c -> add_on(c, add, x, y, out), s)
            twin = retain(g)
            @test update_graph!(c -> add_on(c, add, x2, y, out2), g, s) === true
            launch_graph(twin, s) # every reference runs the new work
            @test all(==(10.5f0), Vector(out2))
            @test all(==(0), Vector(out)) # the earlier work is gone
            @test update_graph!(g, s) do c
                add_on(c, add, x, y, out)
                copyto!(copied, out)
            end === false
            launch_graph(g, s)
            @test all(==(1.5f0), Vector(copied))
            Runtime(0) do other_rt # another runtime's graph: refused
                Stream(other_rt, 0) do os
                    a, b = DeviceBuffer(os, UInt8[3, 3]), DeviceBuffer(os, UInt8[0, 0])
                    foreign = capture_graph(c -> copyto!(b, a), os)
                    expect_error(() -> update_graph!(c -> add_on(c, add, x, y, out), foreign, s),
                                 L.TF_ERROR_INVALID_ARGUMENT, "tf_graph_capture_update")
                    sync_stream(s) # the slot no longer captures
                    expect_error(() -> launch_graph(foreign, s), L.TF_ERROR_INVALID_ARGUMENT, "tf_graph_launch")
                    launch_graph(foreign, os)
                    @test Vector(b) == UInt8[3, 3]
                    close(foreign)
                    foreach(free, (a, b))
                end
            end
            close(twin)
            close(g)
            expect_error(() -> close(g), L.TF_ERROR_INVALID_HANDLE, "tf_graph_release")
            expect_error(() -> launch_graph(g, s), L.TF_ERROR_INVALID_HANDLE, "tf_graph_launch")
            expect_error(() -> retain(g), L.TF_ERROR_INVALID_HANDLE, "tf_graph_retain")
            foreach(free, (x2, out2, copied))
        end
    end

    if DOUBLE
        @testset "the finalizer releases a graph never closed" begin
            with_graph_setup() do rt, s, add, x, y, out
                execs = tfd_live(TFD_GRAPH_EXECS)
                (() -> (capture_graph(c -> add_on(c, add, x, y, out), s); nothing))()
                for _ in 1:100
                    GC.gc()
                    tfd_live(TFD_GRAPH_EXECS) == execs && break
                    sleep(0.01)
                end
                @test tfd_live(TFD_GRAPH_EXECS) == execs
            end
        end

        @testset "failed capture calls leave nothing behind" begin
            with_graph_setup() do rt, s, add, x, y, out
                graphs, execs = tfd_live(TFD_GRAPHS), tfd_live(TFD_GRAPH_EXECS)
                function works()
                    sync_stream(s)
                    @test tfd_capture_nodes(raw_stream(s)) == 0
                    @test (tfd_live(TFD_GRAPHS), tfd_live(TFD_GRAPH_EXECS)) == (graphs, execs)
                end
                body = c -> add_on(c, add, x, y, out)
                tfd_fail("cuStreamBeginCapture", 1, 999, 1)
                err = expect_error(() -> capture_graph(_ -> error("never runs"), s), L.TF_ERROR_CUDA,
                                   "tf_graph_capture_begin")
                @test err.call == "cuStreamBeginCapture"
                works()
                tfd_fail("cuGraphInstantiateWithFlags", 1, 999, 1)
                err = expect_error(() -> capture_graph(body, s), L.TF_ERROR_CUDA, "tf_graph_capture_end")
                @test err.call == "cuGraphInstantiateWithFlags"
                works()
                tfd_fail("cuStreamEndCapture", 1, 999, 1) # refused without ending: aborted
                expect_error(() -> capture_graph(body, s), L.TF_ERROR_CUDA, "tf_graph_capture_end", "still open")
                works()
                g = capture_graph(body, s)
                tfd_fail("cuGraphExecUpdate", 1, 999, 1) # refused in place: instantiated anew
                @test update_graph!(c -> add_on(c, add, y, y, out), g, s) === false
                launch_graph(g, s)
                @test all(==(1.0f0), Vector(out))
                close(g)
                works()
            end
        end

        @testset "a capture that cannot be aborted is logged and torn down" begin
            tfd_reset()
            Runtime(0; stream_slots=2) do rt
                s = Stream(rt, 0)
                a, b = DeviceBuffer(s, UInt8[1, 2]), DeviceBuffer{UInt8}(s, 2)
                tfd_fail("cuStreamEndCapture", 1, 999, 3) # the end and both aborts
                @test_logs (:warn, r"could not be aborted") match_mode=:any begin
                    expect_error(() -> capture_graph(c -> copyto!(b, a), s), L.TF_ERROR_CUDA,
                                 "tf_graph_capture_end", "still open")
                end
                refused(() -> sync_stream(s), "tf_runtime_sync")
                refused(() -> free(a), "tf_free")
                Stream(sync_stream, rt, 1) # other slots are unaffected
                close(s)
            end
            @test tfd_primary_refcount(0) == 0 # the teardown dropped the capture
        end

        @testset "a 1.1 library: the graph calls say they are too old" begin
            tfd_reset()
            Runtime(0) do rt
                push!(TenferroGPU._MISSING_FUNCTIONS, "tf_graph_capture_begin")
                try
                    expect_error(() -> capture_graph(_ -> error("never runs"), rt), L.TF_ERROR_NOT_SUPPORTED,
                                 "tf_graph_capture_begin", "is too old: tf_graph_capture_begin is new in 1.2")
                finally
                    delete!(TenferroGPU._MISSING_FUNCTIONS, "tf_graph_capture_begin")
                end
            end
        end
    end
end
