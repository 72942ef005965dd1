package rpcrdma

import (
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// TestConfigOutOfRange: Dial, Listen and DialClient refuse a Config field
// outside its documented range, naming the field, instead of replacing the
// value.
func TestConfigOutOfRange(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{InlineSend: 10}, "Config.InlineSend is 10 bytes"},
		{Config{InlineRecv: 1 << 30}, "Config.InlineRecv is 1073741824 bytes"},
		{Config{InlineSend: wire.MaxInlineSize + 1}, "Config.InlineSend"},
		{Config{Versions: []wire.Version{wire.Version1, 3}}, "Config.Versions holds version 3"},
		{Config{DoneTimeout: -time.Second}, "Config.DoneTimeout"},
	}
	p := loopback.New()
	for _, tc := range cases {
		if _, err := Dial(t.Context(), p, "nowhere", &tc.cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Dial with %s: err = %v", tc.field, err)
		}
		if l, err := Listen(t.Context(), p, "", &tc.cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Listen with %s: err = %v", tc.field, err)
			if l != nil {
				l.Close()
			}
		}
		if cli, err := DialClient(t.Context(), p, "nowhere", &tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("DialClient with %s: err = %v", tc.field, err)
			if cli != nil {
				cli.Close()
			}
		}
	}
	// The extremes of the range are taken.
	for _, cfg := range []Config{{InlineSend: wire.MinInlineSize, InlineRecv: wire.MaxInlineSize}, {}} {
		if err := cfg.validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
