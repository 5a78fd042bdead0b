# SPDX-License-Identifier: MIT OR Apache-2.0
# Streams: explicit ones, each task's own, and work that moves between OS
# threads.  Included by runtests.jl when a device (or the double) is there.

# Runs fs[1] on Julia thread 1, then fs[2] on thread 2, and so on, one
# after the other; returns the thread ids they ran on.  (:static gives
# iteration i to thread i.)
function one_thread_after_another(fs...)
    n = length(fs)
    Threads.nthreads() >= n || error("needs $n threads")
    ids = zeros(Int, n)
    turn = Threads.Atomic{Int}(1)
    Threads.@threads :static for i in 1:Threads.nthreads()
        if i <= n
            while turn[] != i
                yield()
            end
            ids[i] = Threads.threadid()
            try
                fs[i]()
            finally
                turn[] = i + 1
            end
        end
    end
    return ids
end

# The slot the runtime's own (unbound) handle uses on the calling thread.
function unbound_slot(rt::Runtime)
    out = Ref{Int32}(-1)
    L.tf_runtime_current_slot(rt.ptr, out) == L.TF_OK || error("tf_runtime_current_slot failed")
    return Int(out[])
end

@testset "task streams" begin
    Runtime(0; stream_slots=3) do rt
        s = task_stream(rt)
        @test s isa Stream && isopen(s)
        @test task_stream(rt) === s                 # one per task
        @test task_stream(s) === s
        other = retain(rt)
        @test task_stream(other) === s              # every handle of the runtime
        @test current_slot(rt) == current_slot(s) == s.slot
        @test raw_stream(rt) == slot_stream(rt, s.slot)
        # Another task gets its own, on the next slot in turn; it keeps it
        # across yields, whichever thread it resumes on.
        theirs, same = fetch(Threads.@spawn begin
            t = task_stream(rt)
            for _ in 1:50
                yield()
            end
            (t, task_stream(rt) === t)
        end)
        @test same && theirs !== s && theirs.slot == (s.slot + 1) % 3
        Stream(rt) do next
            @test next.slot == (s.slot + 2) % 3     # Stream(rt) takes the next slot too
        end
        # Closing one Runtime keeps them; the last closes them.
        close(rt)
        @test isopen(s) && isopen(theirs)
        @test task_stream(other) === s
        close(other)
        @test !isopen(s) && !isopen(theirs)
        expect_error(() -> sync_stream(other), L.TF_ERROR_INVALID_HANDLE, "tf_runtime_sync", "Runtime was closed")
    end
    # A closed task stream is replaced at the task's next call.
    Runtime(0; stream_slots=2) do rt
        s = task_stream(rt)
        close(s)
        @test task_stream(rt) !== s && isopen(task_stream(rt))
        sync_stream(rt)
    end
    DOUBLE && @test tfd_primary_refcount(0) == 0 # every stream was released
end

@testset "explicit streams" begin
    Runtime(0; stream_slots=4) do rt
        Stream(rt, 3) do s
            @test current_slot(s) == 3 && raw_stream(s) == slot_stream(rt, 3)
            @test runtime_identity(s) == runtime_identity(rt) && slot_count(s) == 4
            @test device_info(s) == device_info(rt) && primary_context(s) == primary_context(rt)
            again = retain(s)
            @test again.slot == 3 && current_slot(again) == 3
            close(again)
            @test isopen(s)
            rebound = Stream(s, 1) # binding a Stream rebinds
            @test current_slot(rebound) == 1
            close(rebound)
        end
        expect_error(() -> Stream(rt, 4), L.TF_ERROR_INVALID_ARGUMENT, "tf_runtime_bind_slot", "slot 4 is outside 0..3")
        expect_error(() -> Stream(rt, 2^40), L.TF_ERROR_INVALID_ARGUMENT, "tf_runtime_bind_slot", "does not fit")
        s = Stream(rt, 0)
        close(s)
        expect_error(() -> sync_stream(s), L.TF_ERROR_INVALID_HANDLE, "tf_runtime_sync", "Stream was closed")
        expect_error(() -> close(s), L.TF_ERROR_INVALID_HANDLE, "tf_runtime_release", "already closed")
    end
end

@testset "a stream keeps its order across OS threads" begin
    if Threads.nthreads() < 2
        @info "one Julia thread: the cross-thread stream test skips (run julia --threads=2 or more)"
    else
        # On the double (reset: deferred execution), a stream's work runs
        # only when that stream is made to progress, so a download on the
        # wrong stream sees memory as it was.
        DOUBLE && tfd_reset()
        n = 1 << 16
        want = rand(Float32, n)
        # The same Stream object on two OS threads: the download on the
        # second sees the upload queued on the first.
        Runtime(0; stream_slots=4) do rt
            Stream(rt, 2) do s
                DeviceBuffer{Float32}(s, n) do b
                    got = zeros(Float32, n)
                    ids = one_thread_after_another(() -> upload!(b, want), () -> download!(got, b))
                    @test ids[1] != ids[2]
                    @test got == want
                end
            end
        end
        # The runtime's own handle, whose slot follows the OS thread: the
        # download runs on the second thread's slot, without the upload
        # queued on the first's.  This is what a task that moves between
        # threads would meet without a Stream.  (64 slots: every thread its
        # own.)
        if DOUBLE
            Runtime(0; stream_slots=64) do rt
                b = DeviceBuffer{Float32}(rt, n)
                sync_stream(rt) # the allocation, for every slot
                got = zeros(Float32, n)
                slots, status = zeros(Int, 2), zeros(Int32, 2)
                one_thread_after_another(
                    () -> (slots[1] = unbound_slot(rt);
                           status[1] = L.tf_upload(rt.ptr, want, pointer(b).addr, sizeof(want))),
                    () -> (slots[2] = unbound_slot(rt);
                           status[2] = L.tf_download(rt.ptr, pointer(b).addr, got, sizeof(got))))
                @test status == [L.TF_OK, L.TF_OK]
                @test slots[1] != slots[2]
                @test got != want
                tfd_drain_all() # the upload, before the memory is freed
                free(b)
            end
        end
    end
end
