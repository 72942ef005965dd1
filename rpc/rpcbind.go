package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The portmapper, version 2 of the rpcbind program (RFC 1833 Section 3),
// which every rpcbind still answers: where a program's version listens,
// for TCP or UDP.
const (
	PortmapProgram = 100000
	PortmapVersion = 2
	PortmapPort    = 111
	// ProcGetPort is PMAPPROC_GETPORT.
	ProcGetPort = 3
	// IPProtoTCP and IPProtoUDP are the protocols a mapping names.
	IPProtoTCP = 6
	IPProtoUDP = 17
)

// ErrNotRegistered: the portmapper knows no port for the program and
// version (it answered 0, RFC 1833 Section 3.2).
var ErrNotRegistered = errors.New("rpc: the program is not registered with the portmapper")

// GetPort asks the portmapper at addr (host:111) over TCP which port
// program prog, version vers, listens on for proto (IPProtoTCP or
// IPProtoUDP). A program the portmapper does not know gives an error
// matching ErrNotRegistered.
func GetPort(ctx context.Context, addr string, prog, vers, proto uint32) (int, error) {
	t, err := DialTCP(ctx, addr, nil)
	if err != nil {
		return 0, fmt.Errorf("rpc: connecting to the portmapper: %w", err)
	}
	c := NewClient(t)
	defer c.Close()
	var args Body
	for _, v := range [...]uint32{prog, vers, proto, 0} { // struct mapping: prog, vers, prot, port
		args.XDR = xdr.AppendUint32(args.XDR, v)
	}
	rep, err := c.Call(ctx, &Request{Prog: PortmapProgram, Vers: PortmapVersion, Proc: ProcGetPort, Args: args})
	if err != nil {
		return 0, fmt.Errorf("rpc: portmapper GETPORT: %w", err)
	}
	d := NewBodyDecoder(rep.Results)
	port := d.Uint32()
	if err := d.Done(); err != nil {
		return 0, fmt.Errorf("rpc: portmapper GETPORT reply: %w", err)
	}
	if port == 0 {
		return 0, fmt.Errorf("%w: program %s version %d", ErrNotRegistered, AppendProg(nil, prog), vers)
	}
	if port > 65535 {
		return 0, fmt.Errorf("rpc: portmapper GETPORT answered port %d", port)
	}
	return int(port), nil
}
