# Multiplies two matrices with cuBLAS through tenferro-gpu and checks the
# product on the CPU: uploads, a GEMM on the task's own stream slot,
# downloads, errors.  docs/julia.md shows this file.
using TenferroGPU

function main()
    gpu_available() || error("no usable CUDA device")
    Runtime(0) do rt
        # A task may run on any thread between two calls: a bound runtime
        # keeps all of its work on one stream slot, so the upload, the GEMM
        # and the download below are ordered on one stream.
        bind_slot(rt, 0) do worker
            m, n, k = 64, 48, 32
            A = Float32[(i % 7) - 3 for i in 0:m*k-1]   # column-major m x k
            B = Float32[(i % 5) - 2 for i in 0:k*n-1]   # column-major k x n
            DeviceBuffer(worker, A) do dA
                DeviceBuffer(worker, B) do dB
                    DeviceBuffer{Float32}(worker, m * n) do dC
                        # The body gets the slot's cuBLAS handle; sgemm! calls
                        # the cublasSgemm_v2 of the cuBLAS the library loaded.
                        cublas_enqueue(worker) do c
                            sgemm!(c, 'N', 'N', m, n, k, 1, dA, m, dB, k, 0, dC, m)
                        end
                        C = reshape(Vector(dC), m, n)      # waits for the GEMM: same slot
                        first = download_scalar(Float32, worker, pointer(dC))
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
