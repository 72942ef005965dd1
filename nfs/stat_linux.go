package nfs

import "syscall"

// statTimes returns a stat(2) result's access, modification and change
// times.
func statTimes(st *syscall.Stat_t) (a, m, c syscall.Timespec) { return st.Atim, st.Mtim, st.Ctim }

// devNumbers splits a device number into its major and minor numbers, as
// glibc's gnu_dev_major and gnu_dev_minor do.
func devNumbers(dev uint64) (major, minor uint32) {
	return uint32(dev>>8&0xfff | dev>>32&^0xfff), uint32(dev&0xff | dev>>12&^0xff)
}
