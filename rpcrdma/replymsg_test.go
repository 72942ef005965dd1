package rpcrdma

import "testing"

// TestReplyMsgReleasedTwice: a reply released twice goes back once, so
// no two replies later share it.
func TestReplyMsgReleasedTwice(t *testing.T) {
	c := new(requester)
	p := c.getReplyMsg()
	p.put()
	p.put()
	a, b := c.getReplyMsg(), c.getReplyMsg()
	if a == b {
		t.Fatal("two replies share one replyMsg")
	}
	if a != p {
		t.Error("the reply given back was not reused first")
	}
}
