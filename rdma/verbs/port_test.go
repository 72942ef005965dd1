package verbs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestRetryPortInUse(t *testing.T) {
	inUse := fmt.Errorf("rdma_listen: %w", syscall.EADDRINUSE)
	other := errors.New("rdma_listen: no such device")
	for _, tc := range []struct {
		name         string
		port         int
		errs         []error // what each call returns; nil past the end
		wantAttempts int
		wantErr      error
	}{
		{"free at once", 0, nil, 1, nil},
		{"port 0 in use twice", 0, []error{inUse, inUse}, 3, nil},
		{"port 0 always in use", 0, repeat(inUse, 100), listenAttempts, syscall.EADDRINUSE},
		{"explicit port in use", 20049, []error{inUse}, 1, syscall.EADDRINUSE},
		{"another error", 0, []error{other}, 1, other},
		{"in use, then another error", 0, []error{inUse, other}, 2, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			n, err := retryPortInUse(tc.port, func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if n != tc.wantAttempts || calls != tc.wantAttempts {
				t.Errorf("attempts %d (listen called %d times), want %d", n, calls, tc.wantAttempts)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("err %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func repeat(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
