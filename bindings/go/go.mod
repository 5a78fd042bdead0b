module github.com/tensor4all/tenferro-gpu/bindings/go

go 1.19
