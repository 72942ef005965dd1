package rpcrdma

import (
	"sync"
	"testing"
)

// cuts holds, per requester, how a test has it cut its chunks (setCut).
var cuts sync.Map // *Conn → chunkCut

func init() {
	testHookCut = func(c *Conn) chunkCut {
		cut, _ := cuts.Load(c)
		v, _ := cut.(chunkCut)
		return v
	}
}

// setCut makes the requester c cut its calls' chunks as cut until the test
// ends, to imitate other requesters (chunkCut).
func setCut(t testing.TB, c *Conn, cut chunkCut) {
	cuts.Store(c, cut)
	t.Cleanup(func() { cuts.Delete(c) })
}
