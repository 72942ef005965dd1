package nfs

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
)

// The ports NFS is found on where nothing else says (RFC 8267 Section
// 6.1 for NFS/RDMA; RFC 1813 Section 1.1 for NFS on TCP, 2049 by
// convention). MOUNT has no fixed port: rpcbind knows it.
const (
	PortTCP  = 2049
	PortRDMA = 20049
)

// FindExport returns the export of the MOUNT server at mountAddr that p
// lies in: the longest listed one (MOUNT EXPORT) that is p or a parent of
// it. It fails, naming p, when p is in none of them.
func FindExport(ctx context.Context, mountAddr, p string) (string, error) {
	exports, err := Exports(ctx, mountAddr)
	if err != nil {
		return "", err
	}
	best := ""
	for _, e := range exports {
		if InExport(p, e.Dir) && len(e.Dir) > len(best) {
			best = e.Dir
		}
	}
	if best == "" {
		var dirs []string
		for _, e := range exports {
			dirs = append(dirs, e.Dir)
		}
		return "", fmt.Errorf("nfs: %s is in none of the exports of %s (%s)", p, mountAddr, strings.Join(dirs, ", "))
	}
	return best, nil
}

// InExport reports whether the slash-separated path p is export or lies
// under it.
func InExport(p, export string) bool {
	p, export = path.Clean("/"+p), path.Clean("/"+export)
	return p == export || export == "/" || strings.HasPrefix(p, export+"/")
}

// ReadFile reads the whole regular file at the slash-separated path p
// inside the export, as os.ReadFile does.
func (c *Client) ReadFile(ctx context.Context, p string) ([]byte, error) {
	fh, a, err := c.LookupPath(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := regular(V3Files(c), infoOf3(a)); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name(p), err)
	}
	// The size only hints the capacity: a server's GETATTR may not
	// reserve memory it has not sent.
	var b bytes.Buffer
	b.Grow(int(min(a.Size, 64<<20)))
	if _, err := c.Download(ctx, fh, &b); err != nil {
		return b.Bytes(), fmt.Errorf("%s: %w", c.Name(p), err)
	}
	return b.Bytes(), nil
}
