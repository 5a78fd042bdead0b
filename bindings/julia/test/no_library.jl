# SPDX-License-Identifier: MIT OR Apache-2.0
# A program that merely can use a GPU starts, and learns there is none, when
# libtenferro_gpu.so.1 cannot be loaded.  Each case runs a fresh Julia
# process: this one has the library loaded already.

const NO_LIBRARY_SCRIPT = """
    using TenferroGPU
    println(gpu_available())
    println(TenferroGPU.library_problem())
    err = try
        Runtime(0)
        nothing
    catch e
        e
    end
    println(err isa TenferroError && err.status == TenferroGPU.LibTenferro.TF_ERROR_LIBRARY_NOT_FOUND &&
            err.operation == "tf_runtime_new")
    println(sprint(showerror, err)) # needs no library either
    """

# Runs `args` in a fresh Julia with this package's project and `env`
# changed as given (a value of nothing removes the variable); its stdout.
function fresh_julia(args, env_changes)
    env = copy(ENV)
    for (k, v) in env_changes
        v === nothing ? delete!(env, k) : (env[k] = v)
    end
    project = dirname(Base.active_project())
    cmd = `$(Base.julia_cmd()) --startup-file=no --project=$project $args`
    return read(setenv(cmd, env), String) # throws unless it exits 0
end

@testset "starts without the library" begin
    # A TENFERRO_GPU_LIBRARY that names no file.
    missing_file = "/nonexistent/libtenferro_gpu.so.1"
    out = split(fresh_julia(`-e $NO_LIBRARY_SCRIPT`, ["TENFERRO_GPU_LIBRARY" => missing_file]), '\n')
    @test out[1] == "false"
    @test occursin(missing_file, out[2]) && occursin("cannot be loaded", out[2])
    @test out[3] == "true"
    @test startswith(out[4], "TenferroError: tf_runtime_new: ") && occursin("[status 10]", out[4])

    # The SONAME, with the loader's path emptied: unless the library is
    # installed in a system folder, it is not found.
    out = split(fresh_julia(`-e $NO_LIBRARY_SCRIPT`,
                            ["TENFERRO_GPU_LIBRARY" => nothing, "LD_LIBRARY_PATH" => nothing]), '\n')
    if out[1] == "false"
        @test occursin("is not on the dynamic loader's path", out[2])
        @test out[3] == "true"
    else
        @info "libtenferro_gpu.so.1 is installed in a system folder: the SONAME case of the no-library test skips"
    end

    # The example reports "no GPU" and exits 0.
    example = joinpath(@__DIR__, "..", "examples", "sgemm.jl")
    out = fresh_julia(`$example`, ["TENFERRO_GPU_LIBRARY" => missing_file])
    @test startswith(out, "no GPU: TENFERRO_GPU_LIBRARY=$missing_file cannot be loaded")
end
