package iwarp_test

import (
	"context"
	"fmt"
	"log"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
)

// The software iWARP provider on its own: a listener and an initiator on
// loopback TCP, a receive posted on one side and a Send from the other.
// Upper layers (package rpcrdma) take an rdma.Provider and do this for
// them; toward a Linux soft-iWARP (siw) peer, an initiator also sets
// Options.FirstSendDelay to iwarp.SiwFirstSendDelay.
func Example() {
	ctx := context.Background()
	p, err := iwarp.New(iwarp.Options{CRC: iwarp.CRCRequire})
	if err != nil {
		log.Fatal(err)
	}
	l, err := p.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	// The responder posts a receive before the initiator may send: a
	// Send that finds no posted receive ends the connection, as on an
	// RNIC.
	var recv rdma.MR
	accepted := make(chan rdma.Conn, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		c, err := req.Accept(ctx, rdma.ConnConfig{Prepare: func(c rdma.Conn) error {
			if recv, err = c.Alloc(64, rdma.AccessLocalWrite); err != nil {
				return err
			}
			return c.PostRecv(1, []rdma.SGE{{MR: recv, Length: 64}})
		}})
		if err != nil {
			log.Fatal(err)
		}
		accepted <- c
	}()

	c, err := p.Dial(ctx, l.Addr().String(), rdma.ConnConfig{PrivateData: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	msg, err := c.Alloc(64, 0)
	if err != nil {
		log.Fatal(err)
	}
	n := copy(msg.Bytes(), "a Send over MPA, DDP and RDMAP")
	if err := c.PostSend(&rdma.WorkRequest{ID: 9, Op: rdma.OpSend, Local: []rdma.SGE{{MR: msg, Length: n}}}); err != nil {
		log.Fatal(err)
	}

	s := <-accepted
	defer s.Close()
	cs := make([]rdma.Completion, 1)
	if _, err := s.Wait(ctx, cs); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("responder: %v, %q\n", cs[0].Status, recv.Bytes()[:cs[0].Len])
	if _, err := c.Wait(ctx, cs); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("initiator: send %d %v; CRC32c %v\n", cs[0].ID, cs[0].Status, c.(*iwarp.Conn).CRC())
	// Output:
	// responder: success, "a Send over MPA, DDP and RDMAP"
	// initiator: send 9 success; CRC32c true
}
