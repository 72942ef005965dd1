//go:build linux && cgo && verbs

package verbs

// The C side. Work requests, scatter/gather lists, work completions and
// connection-manager events are built and read in C from scalars and from
// C memory, so no Go pointer is ever stored in C memory (the cgo pointer
// rules, "Passing pointers" in the cgo documentation), and the anonymous
// unions of struct ibv_send_wr and struct ibv_wc, which cgo cannot name,
// are reached from C.

/*
#cgo LDFLAGS: -lrdmacm -libverbs
#include "shim.h"
*/
import "C"
