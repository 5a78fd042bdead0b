# SPDX-License-Identifier: MIT OR Apache-2.0
# The exported names, against CUDA.jl's (the list the checker uses), and the
# older names, still there unexported.  Needs no device.

@testset "names: no clash with CUDA.jl, older names deprecated" begin
    list = joinpath(@__DIR__, "..", "checker", "cuda-jl-exports.txt")
    cuda = Set(Symbol(strip(l)) for l in eachline(list) if !isempty(strip(l)) && !startswith(strip(l), "#"))
    @test length(cuda) > 150
    exported = filter(n -> Base.isexported(TenferroGPU, n), names(TenferroGPU))
    @test :synchronize in cuda && :stream in cuda && :device in cuda && :launch in cuda
    @test isempty(intersect(Set(exported), cuda))
    # Replaced, not exported, still callable qualified.
    for old in (:synchronize, :stream, :device, :launch, :bind_slot)
        @test isdefined(TenferroGPU, old) && !Base.isexported(TenferroGPU, old)
    end
    for new in (:Stream, :task_stream, :sync_stream, :sync_event, :raw_stream, :launch_kernel)
        @test Base.isexported(TenferroGPU, new)
    end
end
