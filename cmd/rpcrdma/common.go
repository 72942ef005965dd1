package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// transportFlags are the connection settings every command shares.
type transportFlags struct {
	version      int  // RPC-over-RDMA version: 1, or 2 (falls back to 1 as a requester)
	inline       int  // inline send and receive size offered in RFC 8797 private data
	credits      uint // requested (requester) or granted (responder)
	noRemoteInv  bool // do not use or accept Send With Invalidate
	crc          bool // MPA CRC32c
	mpaRev       int  // MPA revision: 1, or 2 (enhanced, RFC 6581)
	responder    bool
	logLevel     string
	ddpThreshold int
	// firstSendDelay holds a requester's first message after the MPA
	// exchange, as a Linux soft-iWARP (siw) responder needs
	// (iwarp.SiwFirstSendDelay).
	firstSendDelay time.Duration
	// sharedRecvs, on a responder, is the depth of the shared receive
	// pool its connections receive from (rpcrdma.Bounds.SharedReceives);
	// 0: each connection posts receives of its own.
	sharedRecvs  int
	providerName string        // "iwarp" or "verbs"
	device       string        // verbs: the RDMA device connections must use
	busyPoll     time.Duration // verbs: verbs.Options.BusyPoll
}

func (f *transportFlags) register(fs *flag.FlagSet, responder bool) {
	f.responder = responder
	if responder {
		fs.IntVar(&f.version, "rpcrdma-version", 2, "highest RPC-over-RDMA version served (1, or 2 for both)")
		fs.UintVar(&f.credits, "credits", rpcrdma.DefaultCredits, "credits granted to each requester: with --shared-receives, the most, which a connection reaches (at most 32) while its calls keep its grant busy; without, what every connection is granted and posts receives for")
		fs.IntVar(&f.sharedRecvs, "shared-receives", defaultSharedRecvs, sharedRecvsUsage)
	} else {
		fs.IntVar(&f.version, "rpcrdma-version", 1, "RPC-over-RDMA version to start with (2 falls back to 1 on ERR_VERS)")
		fs.UintVar(&f.credits, "credits", rpcrdma.DefaultRequestCredits, "credits requested (most calls outstanding)")
		fs.IntVar(&f.ddpThreshold, "ddp-threshold", rpcrdma.DefaultDDPThreshold, "smallest DDP-eligible argument moved by RDMA Read")
		fs.DurationVar(&f.firstSendDelay, "first-send-delay", 0, fmt.Sprintf("hold the first message this long after connecting: a Linux soft-iWARP (siw) server, such as knfsd over siw, needs %v, or the first call can go unanswered", iwarp.SiwFirstSendDelay))
	}
	fs.IntVar(&f.inline, "inline", rpcrdma.DefaultInlineSize, "inline send and receive size in bytes (1024..262144)")
	fs.BoolVar(&f.noRemoteInv, "no-remote-invalidation", false, "do not use or accept Send With Invalidate")
	fs.BoolVar(&f.crc, "crc", false, "ask for MPA CRC32c (a responder follows the initiator, like Linux siw)")
	fs.IntVar(&f.mpaRev, "mpa-rev", 2, "MPA revision: 2 (enhanced, RFC 6581; what Linux requires) or 1")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.providerName, "provider", "iwarp", "RDMA provider: iwarp (software iWARP over TCP) or verbs (rdma-core; a -tags verbs build)")
	fs.StringVar(&f.device, "device", "", "with --provider verbs: the RDMA device to use (rdma_cm picks it by IP address; this checks it)")
	fs.DurationVar(&f.busyPoll, "busy-poll", 0, "with --provider verbs: poll the completion queue this long before sleeping on its completion channel; negative: only poll, never sleep, as perftest does without -e (each waiting goroutine then keeps a CPU busy)")
}

// check returns a usage error for a flag value out of range.
func (f *transportFlags) check() error {
	if f.version != 1 && f.version != 2 {
		return usagef("--rpcrdma-version %d: want 1 or 2", f.version)
	}
	if err := f.checkProvider(); err != nil {
		return err
	}
	if f.mpaRev != 1 && f.mpaRev != 2 {
		return usagef("--mpa-rev %d: want 1 or 2", f.mpaRev)
	}
	if f.inline < wire.MinInlineSize || f.inline > wire.MaxInlineSize {
		return usagef("--inline %d: want %d to %d", f.inline, wire.MinInlineSize, wire.MaxInlineSize)
	}
	if f.credits == 0 || f.credits > 1<<16 {
		return usagef("--credits %d: want 1 to 65536", f.credits)
	}
	if f.sharedRecvs < 0 {
		return usagef("--shared-receives %d: want 0 (off) or more", f.sharedRecvs)
	}
	if f.ddpThreshold < 0 {
		return usagef("--ddp-threshold %d: want 0 or more", f.ddpThreshold)
	}
	if f.firstSendDelay < 0 {
		return usagef("--first-send-delay %v: want 0 or more", f.firstSendDelay)
	}
	if _, err := f.level(); err != nil {
		return err
	}
	return nil
}

func (f *transportFlags) level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(f.logLevel))); err != nil {
		return 0, usagef("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	return l, nil
}

func (f *transportFlags) logger() *slog.Logger {
	l, _ := f.level()
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// progFlag is a program number flag: it parses decimal or 0x hexadecimal
// and prints as rpc.AppendProg writes program numbers (0x20049001, 100003).
type progFlag uint32

func (p *progFlag) String() string { return progString(uint32(*p)) }

func (p *progFlag) Set(s string) error {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return errors.New("want a program number, decimal or 0x hexadecimal")
	}
	*p = progFlag(v)
	return nil
}

// progString formats a program number as rpc.AppendProg does.
func progString(prog uint32) string { return string(rpc.AppendProg(nil, prog)) }

// config returns the rpcrdma configuration the flags describe.
func (f *transportFlags) config(log *slog.Logger) *rpcrdma.Config {
	cfg := &rpcrdma.Config{
		InlineSend:           f.inline,
		InlineRecv:           f.inline,
		NoRemoteInvalidation: f.noRemoteInv,
		Logger:               log,
		DDPThreshold:         f.ddpThreshold,
	}
	if f.responder {
		cfg.Grant = rpcrdma.GrantPolicy{Max: uint32(f.credits)}
		if f.version == 1 {
			cfg.Versions = []wire.Version{wire.Version1}
		}
	} else {
		cfg.Credits = uint32(f.credits)
		if f.version == 2 {
			cfg.Versions = []wire.Version{wire.Version1, wire.Version2}
		}
	}
	return cfg
}
