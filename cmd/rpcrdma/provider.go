package main

import (
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// provider returns the software iWARP provider the flags describe.
func (f *transportFlags) provider() (rdma.Provider, error) {
	o := iwarp.Options{Revision: f.mpaRev, CRC: iwarp.CRCFollow, FirstSendDelay: f.firstSendDelay}
	if f.crc {
		o.CRC = iwarp.CRCRequire
	}
	return iwarp.New(o)
}

// providerCRC reports whether the connection checks MPA CRCs.
func providerCRC(c *rpcrdma.Conn) bool {
	if x, ok := c.RDMA().(interface{ CRC() bool }); ok {
		return x.CRC()
	}
	return false
}

// providerRevision reports the MPA revision the connection runs, or def.
func providerRevision(c *rpcrdma.Conn, def int) int {
	if x, ok := c.RDMA().(interface{ Revision() int }); ok {
		return x.Revision()
	}
	return def
}
