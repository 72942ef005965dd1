package verbs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestPickedPortErr(t *testing.T) {
	for _, errno := range []error{syscall.EADDRINUSE, syscall.EADDRNOTAVAIL} {
		err := fmt.Errorf("rdma_listen: %w", pickedPortErr(errno))
		if !errors.Is(err, errPicked) || !errors.Is(err, errno) {
			t.Errorf("%v: not marked as a picked port's, or lost its errno", err)
		}
		if want := "rdma_listen: " + errno.Error() + " (port chosen by rdma_cm)"; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
	}
	for _, errno := range []error{syscall.ENODEV, syscall.ETIMEDOUT, errors.New("other")} {
		if err := pickedPortErr(errno); errors.Is(err, errPicked) || err != errno {
			t.Errorf("%v: marked as a picked port's", err)
		}
	}
}

func TestRetryPicked(t *testing.T) {
	taken := fmt.Errorf("rdma_listen: %w", pickedPortErr(syscall.EADDRINUSE))
	explicit := fmt.Errorf("rdma_listen: %w", syscall.EADDRINUSE) // a port the caller chose
	other := errors.New("rdma_listen: no such device")
	for _, tc := range []struct {
		name         string
		errs         []error // what each call returns; nil past the end
		wantAttempts int
		wantErr      error
	}{
		{"free at once", nil, 1, nil},
		{"taken twice", []error{taken, taken}, 3, nil},
		{"always taken", repeat(taken, 100), portAttempts, errPicked},
		{"explicit port in use", []error{explicit}, 1, syscall.EADDRINUSE},
		{"another error", []error{other}, 1, other},
		{"taken, then another error", []error{taken, other}, 2, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			n, err := retryPicked(func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if n != tc.wantAttempts || calls != tc.wantAttempts {
				t.Errorf("attempts %d (try called %d times), want %d", n, calls, tc.wantAttempts)
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
