//go:build darwin || freebsd

package nfs

import (
	"runtime"
	"syscall"
)

// statTimes returns a stat(2) result's access, modification and change
// times.
func statTimes(st *syscall.Stat_t) (a, m, c syscall.Timespec) {
	return st.Atimespec, st.Mtimespec, st.Ctimespec
}

// devNumbers splits a device number into its major and minor numbers, as
// the system's major(3) and minor(3) do.
func devNumbers(dev uint64) (major, minor uint32) {
	if runtime.GOOS == "darwin" {
		return uint32(dev >> 24 & 0xff), uint32(dev & 0xffffff)
	}
	return uint32(dev>>32&0xffffff00 | dev>>8&0xff), uint32(dev>>24&0xff00 | dev&0xffff00ff)
}
