module github.com/go-rpcrdma/rpcrdma

go 1.26
