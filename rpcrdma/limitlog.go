package rpcrdma

// Logging the limits of Bounds as they act, so that the log tells an
// operator what happened without a flood of requests flooding it.
//
// Events are keyed by reason and remote host. The first event of a key is
// logged at once, with the peer's address; the events that follow within
// Bounds.LogInterval are counted, and when the interval ends one line
// gives their count, and the key's next interval starts. A key quiet for a
// whole interval is forgotten, so its next event is logged at once again.
// Whatever the keys, at most limitLogBurst lines are written in any one
// second: an event that finds the second's lines written is counted in
// its key and told by a later line. At most limitLogKeys keys are kept;
// events of further hosts are counted under the host "others".

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

const (
	// limitLogBurst is the most lines limitLog writes in one second.
	limitLogBurst = 4
	// limitLogKeys is the most reason and host pairs limitLog follows.
	limitLogKeys = 256
	// otherHosts is the host events of hosts beyond limitLogKeys count
	// under.
	otherHosts = "others"
)

// limitLog logs a Listener's limit events. Its methods are safe for
// concurrent use.
type limitLog struct {
	log   *slog.Logger
	every time.Duration // 0: every event is logged

	mu     sync.Mutex
	keys   map[limitKey]*limitCount
	second int64 // the Unix second lines were last written in
	lines  int   // lines written in it
	timer  *time.Timer
	armed  bool // timer set to flush
	closed bool
}

type limitKey struct {
	r    Reason
	host string
}

// limitCount is a key's interval: when it started and the events counted
// in it, not yet logged.
type limitCount struct {
	start time.Time
	n     uint64
}

func newLimitLog(log *slog.Logger, every time.Duration) *limitLog {
	return &limitLog{log: log, every: every, keys: make(map[limitKey]*limitCount)}
}

// event logs, or counts for a later line, the limit r acting on the peer
// at remote.
func (g *limitLog) event(r Reason, remote net.Addr) {
	if g.every <= 0 {
		g.log.Info("rpcrdma: limit reached", "reason", r.String(), "remote", remote)
		return
	}
	now := time.Now()
	k := limitKey{r, hostOf(remote)}
	g.mu.Lock()
	defer g.mu.Unlock()
	kc := g.keys[k]
	if kc == nil && len(g.keys) >= limitLogKeys {
		g.sweepLocked(now)
		if len(g.keys) >= limitLogKeys {
			k.host = otherHosts
			kc = g.keys[k]
		}
	}
	switch {
	case kc == nil:
		g.keys[k] = &limitCount{start: now}
		if g.lineLocked(now) {
			g.log.Info("rpcrdma: limit reached", "reason", r.String(), "remote", remote)
			return
		}
		g.keys[k].n = 1
	case now.Sub(kc.start) >= g.every:
		n := kc.n + 1
		if kc.n == 0 && g.lineLocked(now) {
			kc.start = now
			g.log.Info("rpcrdma: limit reached", "reason", r.String(), "remote", remote)
			return
		}
		if g.lineLocked(now) {
			g.logCountLocked(k, n, now.Sub(kc.start))
			kc.start, kc.n = now, 0
			return
		}
		kc.n = n
	default:
		kc.n++
	}
	g.armLocked(now)
}

// lineLocked reports whether a line may be written now, and counts it.
func (g *limitLog) lineLocked(now time.Time) bool {
	if s := now.Unix(); s != g.second {
		g.second, g.lines = s, 0
	}
	if g.lines >= limitLogBurst {
		return false
	}
	g.lines++
	return true
}

func (g *limitLog) logCountLocked(k limitKey, n uint64, over time.Duration) {
	g.log.Info("rpcrdma: limit reached again", "reason", k.r.String(), "host", k.host, "times", n, "over", over.Round(time.Millisecond))
}

// armLocked sets the timer to flush the counts, unless it is set or the
// log is closed.
func (g *limitLog) armLocked(now time.Time) {
	if g.armed || g.closed {
		return
	}
	d := time.Second // lines held back by the burst bound wait for the next second
	for _, kc := range g.keys {
		if kc.n > 0 {
			d = min(d, max(kc.start.Add(g.every).Sub(now), time.Millisecond))
		}
	}
	// A single timer, set only while there are counts to tell: the
	// flush goroutine runs once per interval at most.
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.flush)
	} else {
		g.timer.Reset(d)
	}
	g.armed = true
}

// flush logs the counts of the intervals that have ended, within the
// burst bound, and forgets the keys quiet for a whole interval.
func (g *limitLog) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	now := time.Now()
	pending := false
	for k, kc := range g.keys {
		switch {
		case now.Sub(kc.start) < g.every:
			pending = pending || kc.n > 0
		case kc.n == 0:
			delete(g.keys, k)
		case g.lineLocked(now):
			g.logCountLocked(k, kc.n, now.Sub(kc.start))
			kc.start, kc.n = now, 0
		default:
			pending = true
		}
	}
	if pending {
		g.armLocked(now)
	}
}

// sweepLocked forgets the keys quiet for a whole interval.
func (g *limitLog) sweepLocked(now time.Time) {
	for k, kc := range g.keys {
		if kc.n == 0 && now.Sub(kc.start) >= g.every {
			delete(g.keys, k)
		}
	}
}

// close stops the timer and logs the counts not yet told, one line per
// Reason summed over the hosts; events after close still log their first
// occurrence and count the rest, told by the key's next line.
func (g *limitLog) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	if g.timer != nil {
		g.timer.Stop()
		g.armed = false
	}
	var times, hosts [NumReasons]uint64
	for k, kc := range g.keys {
		if kc.n > 0 {
			times[k.r] += kc.n
			hosts[k.r]++
			kc.n = 0
		}
	}
	for r := range NumReasons {
		if times[r] > 0 {
			g.log.Info("rpcrdma: limit reached again", "reason", r.String(), "hosts", hosts[r], "times", times[r])
		}
	}
}
