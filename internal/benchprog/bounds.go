package benchprog

// ArgLimit says how many bytes of read chunks (DDP-eligible arguments) a
// call of the bench program may carry, for rpcrdma.Bounds.ArgLimit: a
// WRITE's data up to MaxData; no other procedure has DDP-eligible
// arguments (negative: none; ECHO's long argument travels in a
// position-zero chunk, which the transport's budgets bound). Other
// programs get 0, no opinion.
func ArgLimit(prog, vers, proc uint32) int64 {
	switch {
	case prog != Prog:
		return 0
	case vers == Vers && proc == ProcWrite:
		return MaxData
	}
	return -1
}
