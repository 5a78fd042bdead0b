# SPDX-License-Identifier: MIT OR Apache-2.0
# An exception thrown in a body the library runs (with_context,
# stream_enqueue, cublas_enqueue) reaches the caller as the same object,
# and where it was thrown is still on the exception stack.

@noinline thrown_in_the_body(n) = throw(ArgumentError("thrown in the body $n"))

# The function names of every backtrace on an exception stack, the
# captured ones included.
function frames_of(stack)
    names = Symbol[]
    for entry in stack
        trace = entry.exception isa CapturedException ?
            [frame for (frame, _) in entry.exception.processed_bt] : stacktrace(entry.backtrace)
        append!(names, [frame.func for frame in trace])
    end
    return names
end

@testset "body exceptions keep their backtrace" begin
    Runtime(0; stream_slots=2) do rt
        Stream(rt, 1) do s
            bodies = Any["with_context" => f -> with_context(f, s),
                         "stream_enqueue" => f -> stream_enqueue(_ -> f(), s)]
            supports(s, L.TF_CAP_CUBLAS) && push!(bodies, "cublas_enqueue" => f -> cublas_enqueue(_ -> f(), s))
            for (n, (name, run_body)) in enumerate(bodies)
                stack = try
                    run_body(() -> thrown_in_the_body(n))
                    nothing
                catch
                    current_exceptions()
                end
                @test stack !== nothing
                stack === nothing && continue
                @test stack[end].exception == ArgumentError("thrown in the body $n") # the object itself
                @test :thrown_in_the_body in frames_of(stack)
                :thrown_in_the_body in frames_of(stack) || @info "$name: the body's frame is lost"
            end
            # The library is fine afterwards: the slot was released.
            @test stream_enqueue(_ -> 7, s) == 7
        end
    end
end
