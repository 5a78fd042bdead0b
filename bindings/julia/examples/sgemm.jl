# SPDX-License-Identifier: MIT OR Apache-2.0
# Multiplies two matrices with cuBLAS through tenferro-gpu and checks the
# product on the CPU: uploads, a GEMM on the task's stream, downloads,
# errors.  Without a GPU (or without libtenferro_gpu.so.1) it says so and
# exits 0, as a program that merely can use a GPU should.  docs/julia.md
# shows this file.
using TenferroGPU

function main()
    if !gpu_available()
        problem = TenferroGPU.library_problem()
        println("no GPU: ", isempty(problem) ? "no usable CUDA device" : problem)
        return
    end
    Runtime(0) do rt
        # A Stream is one stream slot, whatever OS thread the task runs on:
        # the upload, the GEMM and the download below are ordered on it.
        Stream(rt) do s
            m, n, k = 64, 48, 32
            A = Float32[(i % 7) - 3 for i in 0:m*k-1]   # column-major m x k
            B = Float32[(i % 5) - 2 for i in 0:k*n-1]   # column-major k x n
            DeviceBuffer(s, A) do dA
                DeviceBuffer(s, B) do dB
                    DeviceBuffer{Float32}(s, m * n) do dC
                        # The body gets the slot's cuBLAS handle; sgemm! calls
                        # the cublasSgemm_v2 of the cuBLAS the library loaded.
                        cublas_enqueue(s) do c
                            sgemm!(c, 'N', 'N', m, n, k, 1, dA, m, dB, k, 0, dC, m)
                        end
                        C = reshape(Vector(dC), m, n)      # waits for the GEMM: same stream
                        first = download_scalar(Float32, s, pointer(dC))
                        want = reshape(A, m, k) * reshape(B, k, n)
                        C == want && first == C[1, 1] ||
                            error("the product differs from the CPU's by $(maximum(abs.(C .- want)))")
                        println("C[1,1] = $first; the $(m)x$n product matches the CPU")
                    end
                end
            end
        end
    end
end

try
    main()
catch e
    e isa TenferroError || rethrow()
    println("$(e.operation) failed in $(repr(e.call)) (code $(e.code)): $(e.message)")
    exit(1)
end
