# SPDX-License-Identifier: MIT OR Apache-2.0
# The CUDA.jl extension (ext/TenferroGPUCUDAExt.jl), where CUDA.jl is
# installed in the environment and has a real GPU: CUDA.jl loads its own
# driver, so the double cannot stand in.  It is not a test dependency of
# the package: add CUDA.jl to the environment to run this.

function cuda_extension_checks()
    Runtime(0; stream_slots=2) do rt
        Stream(rt, 1) do s
            cs = CUDA.CuStream(s)
            @test cs.handle == raw_stream(s)
            @test CUDA.CuContext(s).handle == primary_context(s)
            v = Float32.(1:1000)
            DeviceBuffer(s, v) do b
                a = unsafe_wrap(CUDA.CuArray, b)
                @test length(a) == 1000 && UInt(pointer(a)) == pointer(b).addr
                CUDA.stream!(cs) do # CUDA.jl's work on the slot's stream, after the upload
                    a .+= 1
                end
                @test Vector(b) == v .+ 1 # the download waits on the same stream
                m = unsafe_wrap(CUDA.CuArray, b, (10, 100))
                @test size(m) == (10, 100)
                @test_throws DimensionMismatch unsafe_wrap(CUDA.CuArray, b, (10, 101))
                @test DevicePtr(pointer(a)) == pointer(b)
            end
        end
    end
end

@testset "CUDA.jl views of streams and buffers" begin
    if DOUBLE || Base.find_package("CUDA") === nothing
        @info "the CUDA.jl extension test needs CUDA.jl installed and a GPU: skipped"
    else
        @eval Main using CUDA
        ext = Base.get_extension(TenferroGPU, :TenferroGPUCUDAExt)
        @test ext !== nothing
        if ext !== nothing && Base.invokelatest(CUDA.functional)
            Base.invokelatest(cuda_extension_checks)
        end
    end
end
