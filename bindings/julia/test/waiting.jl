# SPDX-License-Identifier: MIT OR Apache-2.0
# Blocking calls that let the garbage collector run (Julia 1.12: gc_safe
# @ccall) or that wait by polling (before 1.12).  Both need the double:
# the first makes the device slow with a host function that sleeps, the
# second with the double's background thread.

const LIBC = Libdl.dlopen("libc.so.6")

# Queues on the stream a host function that blocks the thread that runs
# it for `seconds`: libc's sleep(unsigned), whose argument is the host
# function's user data.  The double runs host functions on the thread
# that makes the stream progress (the one waiting).
function queue_sleep(s::Stream, seconds::Integer)
    launch_host_func = real_entry("cuLaunchHostFunc", 10000)
    stream_enqueue(s) do cu_stream
        r = ccall(launch_host_func, Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
                  cu_stream, Libdl.dlsym(LIBC, :sleep), Ptr{Cvoid}(UInt(seconds)))
        r == 0 || error("cuLaunchHostFunc answered $r")
    end
end

# The blocking calls, each waiting for what was queued on s before it.
function blocking_calls(s::Stream, buf::DeviceBuffer{Float32}, ev::Event)
    return ("sync_stream" => () -> sync_stream(s),
            "download!" => () -> download!(zeros(Float32, 4), buf),
            "download_scalar" => () -> download_scalar(Float32, s, pointer(buf)),
            "sync_event" => () -> (record!(s, ev); sync_event(ev)))
end

@testset "blocking calls let the garbage collector run" begin
    if !(DOUBLE && TenferroGPU.wait_mode() === :gc_safe && Threads.nthreads() >= 2)
        @info "the gc_safe test needs the double, Julia 1.12 or later (wait mode gc_safe, " *
              "now $(TenferroGPU.wait_mode())) and two threads: skipped"
    else
        tfd_reset()
        Runtime(0; stream_slots=2) do rt
            Stream(rt, 1) do s
                DeviceBuffer(s, Float32[1, 2, 3, 4]) do buf
                    Event(s) do ev
                        GC.gc(true) # finalizers due now run now, not in the measured collection
                        for (name, call) in blocking_calls(s, buf, ev)
                            queue_sleep(s, 1)
                            collector = Threads.@spawn begin
                                sleep(0.2) # the call is blocked in the host function by now
                                @elapsed GC.gc(false)
                            end
                            waited = @elapsed call()
                            collection = fetch(collector)
                            @test waited >= 0.9       # the call ran the host function
                            @test collection < 0.5    # and the collection did not wait for it
                            collection < 0.5 || @info "$name: the collection took $(collection) s"
                        end
                    end
                end
            end
        end
    end
end

@testset "waiting by polling lets other tasks run" begin
    if !DOUBLE
        @info "the polling test needs the double (its background thread plays a slow device): skipped"
    else
        saved = TenferroGPU._WAIT_MODE[]
        TenferroGPU._WAIT_MODE[] = :poll
        tfd_reset()
        tfd_set_execution(TFD_EXEC_BACKGROUND)
        tfd_set_background_delay_us(300_000) # each op runs once 300 ms old
        try
            Runtime(0; stream_slots=2) do rt
                Stream(rt, 1) do s
                    v = Float32[1, 2, 3, 4]
                    DeviceBuffer{Float32}(s, 4) do buf
                        Event(s) do ev
                            for (name, call) in blocking_calls(s, buf, ev)
                                upload!(buf, v) # runs 300 ms from now, as does each wait's event
                                ticks = Threads.Atomic{Int}(0)
                                done = Threads.Atomic{Bool}(false)
                                ticker = @async while !done[] # this thread, while the call waits
                                    Threads.atomic_add!(ticks, 1)
                                    sleep(0.01)
                                end
                                waited = @elapsed call()
                                done[] = true
                                wait(ticker)
                                @test waited >= 0.2   # the device took its time
                                @test ticks[] >= 5    # the task yielded meanwhile
                                @test download_scalar(Float32, s, pointer(buf) + 12) == v[end]
                                ticks[] >= 5 || @info "$name: $(ticks[]) ticks in $waited s"
                                v = v .+ 1
                            end
                        end
                    end
                end
            end
        finally
            tfd_reset()
            TenferroGPU._WAIT_MODE[] = saved
        end
    end
end
