package main

import (
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// checkProvider checks --provider and --device.
func (f *transportFlags) checkProvider() error {
	switch f.providerName {
	case "iwarp":
		if f.device != "" {
			return usagef("--device %q: only with --provider verbs", f.device)
		}
		if f.busyPoll != 0 {
			return usagef("--busy-poll %v: only with --provider verbs (the software iWARP reads its socket through Go's network poller)", f.busyPoll)
		}
	case "verbs":
		if !verbs.Available {
			return usagef("--provider verbs: %v", verbs.ErrNotBuilt)
		}
		if f.crc || f.mpaRev != 2 {
			return usagef("--crc and --mpa-rev are for --provider iwarp (the device's iWARP, if any, chooses)")
		}
	default:
		return usagef("--provider %q: want iwarp or verbs", f.providerName)
	}
	return nil
}

// provider returns the provider the flags describe.
func (f *transportFlags) provider() (rdma.Provider, error) {
	if f.providerName == "verbs" {
		return verbs.New(verbs.Options{Device: f.device, BusyPoll: f.busyPoll, Logger: f.logger()})
	}
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
