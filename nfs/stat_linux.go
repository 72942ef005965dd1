package nfs

import "syscall"

// statTimes returns a stat(2) result's access, modification and change
// times.
func statTimes(st *syscall.Stat_t) (a, m, c syscall.Timespec) { return st.Atim, st.Mtim, st.Ctim }
