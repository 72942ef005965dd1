package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// benchHost is the machine a bench ran on (with --connect, the client's).
// The same code's figures differ more between two machines than between
// runs on one, so a report says which machine produced it, as fio's
// header does.
type benchHost struct {
	CPU        string `json:"cpu,omitempty"` // the first "model name" of /proc/cpuinfo (Linux)
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	OS         string `json:"os"`
	Kernel     string `json:"kernel,omitempty"` // /proc/sys/kernel/osrelease (Linux)
	Go         string `json:"go"`
	Time       string `json:"time"` // when the report was written, RFC 3339, UTC
}

// thisHost describes the machine this process runs on; what it cannot
// read is left empty.
func thisHost() benchHost {
	h := benchHost{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS,
		Go: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		h.CPU = cpuModel(f)
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

// cpuModel returns the first "model name" of a /proc/cpuinfo, or "".
func cpuModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// String is the report's first line: "host: CPU, N CPUs, GOMAXPROCS G,
// OS KERNEL, GO, TIME".
func (h benchHost) String() string {
	var b strings.Builder
	b.WriteString("host: ")
	if h.CPU != "" {
		b.WriteString(h.CPU + ", ")
	}
	fmt.Fprintf(&b, "%s, GOMAXPROCS %d, %s", plural(h.CPUs, "CPU"), h.GOMAXPROCS, h.OS)
	if h.Kernel != "" {
		b.WriteString(" " + h.Kernel)
	}
	fmt.Fprintf(&b, ", %s, %s", h.Go, h.Time)
	return b.String()
}
