package rpc

// Reconnection. A Client from DialClient owns a reconnecting goroutine,
// which watches the current link. When the link fails (its transport
// delivers an error), the Client stops using it at once (lose): callers
// whose calls were in flight on it wait for the next link and send their
// calls again there, and new calls wait too. The goroutine closes the old
// transport, waits for its last delivery, and dials until a dial succeeds,
// waiting longer after each failure (backoff), or until it has failed
// ReconnectConfig.Attempts times in a row, when the Client fails for good.
// A connection the peer closes, with calls waiting, before answering any
// (a hang-up: a server of another protocol on the port, or one refusing
// the client after accepting it) is a failed attempt too, so that calls
// do not wait out their contexts while the same thing happens again.
//
// The calls are sent again only on a new connection, never on the one
// they were sent on: an RPC-over-RDMA requester may not send more calls
// than its credits allow, and credits belong to one connection (RFC 8166
// section 4.3; Linux's xprtrdma resends only after reconnecting, with
// fresh registrations, as here: the new transport registers the call's
// memory itself). A resent call keeps its xid, so a server with a
// duplicate request cache (knfsd's) answers it from the cache instead of
// running it twice.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// ReconnectConfig configures a Client from DialClient. Only Dial is
// required.
type ReconnectConfig struct {
	// Dial returns a new transport to the server: for the first
	// connection, and after each loss. ctx ends when the Client is
	// closed, and Dial must then return: Close waits for it. A nil
	// transport with a nil error counts as a failed dial.
	Dial func(ctx context.Context) (Transport, error)

	// MinBackoff is the wait before the second dial after a loss
	// (default 100 ms); it doubles after each failure up to MaxBackoff
	// (default 30 s, Linux's xprtrdma cap), and each wait is drawn at
	// random from its upper half, so that clients cut off together do not
	// all redial together. The first dial after a connection that carried
	// a reply is immediate; a connection that carried none counts as a
	// failure, so a server that accepts and drops connections is not
	// redialed in a tight loop.
	MinBackoff, MaxBackoff time.Duration

	// Attempts is how many attempts in a row may fail before the Client
	// gives up: its pending and later calls then fail with a *ConnError
	// wrapping the last failure's error. An attempt fails when its dial
	// fails, or when the peer closes the connection it made, with calls
	// waiting, before answering anything (a hang-up). 0 means no limit on
	// failed dials (a call then waits for a connection as long as its
	// context allows), and gives up after 5 hang-ups in a row. A peer
	// that answered with HTTP (ErrHTTP) is no RPC server: the Client gives
	// up at once.
	Attempts int

	// FailPending makes calls in flight when their connection is lost
	// fail with a *ConnError instead of being sent again on the next
	// connection. Set it for calls that must not run twice on a server
	// without a duplicate request cache. Calls not yet sent wait for the
	// next connection either way.
	FailPending bool

	// ReplyTimeout, if positive, ends a connection on which calls have
	// waited that long (to within a quarter of it) with nothing received,
	// so that they are sent again on a new one. An RDMA connection has no
	// keepalive of its own, and Linux's xprtrdma disconnects on an RPC
	// timeout the same way (xprt_rdma_timer). 0, the default, never ends
	// a connection for its silence; a call that legitimately runs longer
	// than ReplyTimeout would be sent again, so set it above the longest.
	ReplyTimeout time.Duration

	// IdleTimeout, if positive, closes a connection that has carried no
	// call for that long (to within a quarter of it); the next call dials
	// a new one. A server keeps resources for each connection (an
	// RPC-over-RDMA responder registers about 1 MiB of receive buffers),
	// which Linux's RPC client gives back by closing idle connections
	// after 5 minutes. 0, the default, keeps connections open.
	IdleTimeout time.Duration
}

const (
	defaultMinBackoff = 100 * time.Millisecond
	defaultMaxBackoff = 30 * time.Second
	// defaultHangUps is how many hang-ups in a row a Client without
	// ReconnectConfig.Attempts takes before giving up: a peer that
	// accepts each connection and closes it unanswered is no server of
	// the calls, however long they wait.
	defaultHangUps = 5
)

// DialClient dials a first transport with cfg.Dial and returns a Client
// making calls over it, or the dial's error. When the transport fails, the
// Client dials another and sends the calls in flight again on it, with
// their xids (see ReconnectConfig); a call fails with a *ConnError only
// when the Client gives up (ReconnectConfig.Attempts), is closed, or, with
// FailPending, loses the connection the call was sent on. Close stops the
// reconnecting too.
func DialClient(ctx context.Context, cfg ReconnectConfig) (*Client, error) {
	if cfg.Dial == nil {
		return nil, errors.New("rpc: ReconnectConfig.Dial is nil")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = defaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	t, err := dial(ctx, cfg.Dial)
	if err != nil {
		return nil, err
	}
	c := newClient()
	c.want = make(chan struct{}, 1)
	re := &reconnector{c: c, cfg: cfg, done: make(chan struct{})}
	re.ctx, re.cancel = context.WithCancel(context.Background())
	re.backoff = backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff, rand: rand.Float64}
	c.re = re
	l := newLink(t, true)
	c.start(l)
	go re.run(l)
	return c, nil
}

// dial calls d, turning a nil transport into an error.
func dial(ctx context.Context, d func(context.Context) (Transport, error)) (Transport, error) {
	t, err := d(ctx)
	if err == nil && t == nil {
		err = errors.New("rpc: ReconnectConfig.Dial returned no transport and no error")
	}
	return t, err
}

// reconnector is a DialClient Client's reconnecting goroutine.
type reconnector struct {
	c       *Client
	cfg     ReconnectConfig
	ctx     context.Context // ends the dials when the Client is closed
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	backoff backoff

	// failed counts the attempts (redials) in a row that failed: dials
	// that failed, of which dialsFailed counts, and hang-ups. hungUp
	// counts the hang-ups in the same run of failures, that of the
	// connection lost first included; hungUpBy names the peer of the
	// last. Only run and redial use them.
	failed, dialsFailed, hungUp int
	hungUpBy                    string
}

// stop ends the reconnecting and waits for run to return; the Client has
// failed (c.dead is closed) before.
func (re *reconnector) stop() {
	re.cancel()
	<-re.done
}

// run watches l and each link after it until the Client fails.
func (re *reconnector) run(l *link) {
	defer close(re.done)
	c := re.c
	redialed := false // l was made by redial, not DialClient
	for {
		idle, ours, ok := re.watch(l)
		if !ok {
			return
		}
		l.t.Close()
		<-l.recvDone
		if errors.Is(l.lostErr, ErrHTTP) {
			// Not an RPC server: another dial reaches the same one.
			c.fail(&ConnError{Err: unwrapConn(l.lostErr)})
			return
		}
		switch {
		case l.received.Load() > 0:
			re.backoff.reset()
			re.failed, re.dialsFailed, re.hungUp = 0, 0, 0
		case !ours && c.hasPending():
			// A hang-up. That of a connection made by a redial is a
			// failed attempt; the first connection's loss only starts
			// the redials.
			if redialed {
				re.failed++
			}
			re.hungUp++
			re.hungUpBy = "the server"
			if a := remoteAddr(l.t); a != nil {
				re.hungUpBy = a.String()
			}
			if re.givingUp() {
				c.fail(&ConnError{Err: re.giveUpError(l.lostErr)})
				return
			}
		default:
			// Ended by a timeout, or with nothing to send: the dial
			// succeeded, and nothing failed.
			re.failed, re.dialsFailed, re.hungUp = 0, 0, 0
		}
		if idle {
			// Dial again when a call needs a connection.
			select {
			case <-c.want:
			case <-c.dead:
				return
			}
		}
		if l = re.redial(); l == nil {
			return
		}
		redialed = true
		// Counted before start publishes the link: a call resent on it
		// may complete at once, and its caller then reads Stats.
		c.stats.reconnects.Add(1)
		if !c.start(l) {
			return
		}
	}
}

// watch waits until l is lost, ending it first if ReplyTimeout passes
// with calls waiting on it and nothing received, or if IdleTimeout passes
// with no call at all; ours reports that it ended l, idle that it did so
// for the latter. ok is false if the Client fails first.
func (re *reconnector) watch(l *link) (idle, ours, ok bool) {
	c := re.c
	reply, idleAfter := re.cfg.ReplyTimeout, re.cfg.IdleTimeout
	if reply <= 0 && idleAfter <= 0 {
		select {
		case <-l.lost:
			return false, false, true
		case <-c.dead:
			return false, false, false
		}
	}
	period := time.Hour
	for _, d := range []time.Duration{reply, idleAfter} {
		if d > 0 {
			period = min(period, max(d/4, time.Millisecond))
		}
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	var silent silence
	var started uint64
	var busyAt time.Time
	for {
		select {
		case <-l.lost:
			return idle, ours, true
		case <-c.dead:
			return idle, ours, false
		case <-tick.C:
			// The time now, not the tick's: a tick read late (this
			// goroutine kept waiting on a loaded machine) would count
			// the wait as silence or idleness.
			now := time.Now()
			if idle {
				continue // closed; waiting for lost
			}
			if reply > 0 && silent.observe(now, l.received.Load(), c.waitingOn(l)) >= reply {
				c.stats.timeouts.Add(1)
				ours = true
				l.t.Close() // its transport then fails, and lose follows
				silent = silence{}
			}
			if idleAfter > 0 && c.idleFor(now, &started, &busyAt) >= idleAfter {
				c.stats.idleCloses.Add(1)
				idle, ours = true, true
				l.t.Close()
			}
		}
	}
}

// idleFor returns how long the Client has had no call, from samples
// taken at ticks: started and busyAt carry the count of calls begun and
// the last time one was pending from one sample to the next. When it
// returns a positive duration it has also dropped any stale demand for a
// connection (c.want), so that only a call made from now on dials again.
func (c *Client) idleFor(now time.Time, started *uint64, busyAt *time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending.Len() > 0 || c.started != *started || busyAt.IsZero() {
		*started, *busyAt = c.started, now
		return 0
	}
	select {
	case <-c.want:
	default:
	}
	return now.Sub(*busyAt)
}

// waitingOn reports whether a call sent on l is waiting for its reply.
func (c *Client) waitingOn(l *link) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pc := range c.pending.All() {
		if pc.on == l {
			return true
		}
	}
	return false
}

// hasPending reports whether calls are waiting for their replies, sent
// or not.
func (c *Client) hasPending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending.Len() > 0
}

// givingUp reports whether the attempts that failed in a row are as many
// as the Client takes.
func (re *reconnector) givingUp() bool {
	if re.cfg.Attempts > 0 {
		return re.failed >= re.cfg.Attempts
	}
	return re.hungUp >= defaultHangUps
}

// unwrapConn returns the cause of err if it is a *ConnError with one:
// the Client's own error is a *ConnError itself.
func unwrapConn(err error) error {
	if ce, ok := errors.AsType[*ConnError](err); ok && ce.Err != nil {
		return ce.Err
	}
	return err
}

// giveUpError returns the error the Client fails with when it gives up,
// the last attempt having failed with err.
func (re *reconnector) giveUpError(err error) error {
	err = unwrapConn(err)
	switch {
	case re.hungUp == 0:
		return fmt.Errorf("rpc: reconnecting: %d dials failed, the last with: %w", re.dialsFailed, err)
	case re.dialsFailed == 0:
		return fmt.Errorf("%s keeps closing the connection before answering: closed %d connections in a row (the last: %w)", re.hungUpBy, re.hungUp, err)
	}
	return fmt.Errorf("reconnecting: %s closed %d connections in a row before answering, and %d dials failed; the last: %w",
		re.hungUpBy, re.hungUp, re.dialsFailed, err)
}

// redial dials until a dial succeeds, returning the new link, or until the
// Client is closed or gives up (nil).
func (re *reconnector) redial() *link {
	c := re.c
	var timer *time.Timer
	for {
		if d := re.backoff.wait(); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
				defer timer.Stop()
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-re.ctx.Done():
				return nil
			}
		}
		t, err := dial(re.ctx, re.cfg.Dial)
		if err == nil {
			return newLink(t, true)
		}
		if re.ctx.Err() != nil {
			return nil
		}
		c.stats.dialErrors.Add(1)
		re.failed++
		re.dialsFailed++
		if re.givingUp() {
			c.fail(&ConnError{Err: re.giveUpError(err)})
			return nil
		}
	}
}

// backoff spaces the dials after a loss: the first goes at once, each
// later one after a wait that starts at min and doubles up to max, drawn
// at random from the upper half of that.
type backoff struct {
	min, max time.Duration
	rand     func() float64 // in [0, 1)
	cur      time.Duration  // the last wait's ceiling; 0 before the first dial
	dialed   bool
}

// wait returns how long to wait before the next dial.
func (b *backoff) wait() time.Duration {
	if !b.dialed {
		b.dialed = true
		return 0
	}
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return b.cur - half + time.Duration(b.rand()*float64(half))
}

// reset makes the next dial go at once, and later waits start again at
// min: the connection it made was of use.
func (b *backoff) reset() { *b = backoff{min: b.min, max: b.max, rand: b.rand} }

// silence measures how long calls have waited on a link with nothing
// received, from samples taken at ticks.
type silence struct {
	since    time.Time // when the current silence began; zero if none
	received uint64
}

// observe takes a sample at now: received messages so far, and whether
// calls are waiting. It returns how long the silence has lasted.
func (s *silence) observe(now time.Time, received uint64, waiting bool) time.Duration {
	if !waiting || received != s.received || s.since.IsZero() {
		s.received = received
		s.since = now
		if !waiting {
			s.since = time.Time{}
		}
		return 0
	}
	return now.Sub(s.since)
}
