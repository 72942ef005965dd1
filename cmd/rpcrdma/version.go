package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
)

// toolVersion is the module's version as the build recorded it: a tag
// for `go install ...@v1.2.3`, a pseudo-version or "(devel)" with the
// commit for a build from a clone.
func toolVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+modified"
			}
		}
	}
	if (v == "" || v == "(devel)") && rev != "" {
		return "(devel) " + rev[:min(12, len(rev))] + dirty
	}
	if v == "" {
		return "(devel)"
	}
	return v
}

func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs, ""); err != nil {
		return err
	}
	providers := "iwarp (software iWARP), loopback"
	if verbs.Available {
		providers += ", verbs (rdma-core)"
	} else {
		providers += "; verbs not built in (build with -tags verbs)"
	}
	fmt.Fprintf(stdout, "rpcrdma %s\n%s %s/%s\nproviders: %s\n", toolVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH, providers)
	return nil
}
