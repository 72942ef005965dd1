package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// server is one NFS server the client is run against.
type server struct {
	name string
	args []string // rpcrdma nfs bench flags that reach it
}

// nfsCase is one `rpcrdma nfs bench` run.
type nfsCase struct {
	name string
	args []string
	iops bool // report ops/s rather than MB/s
}

var nfsCases = []nfsCase{
	{"1 MiB seq WRITE qd 4", []string{"--op", "write", "--pattern", "seq", "--bs", "1m", "--qd", "4"}, false},
	{"1 MiB seq READ qd 4", []string{"--op", "read", "--pattern", "seq", "--bs", "1m", "--qd", "4"}, false},
	{"4 KiB rand READ qd 32", []string{"--op", "read", "--pattern", "rand", "--bs", "4k", "--qd", "32"}, true},
}

// samples holds each figure's value per round, by key.
type samples map[string][]float64

// compare is the compare command: it starts the servers, runs every
// case against each of them and the plain benches, round after round,
// and prints the figures and their ratios.
func compare(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	rounds := fs.Int("rounds", 5, "rounds; every case runs once per round against every server")
	duration := fs.Duration("duration", time.Second, "measuring time of each case")
	dir := fs.String("dir", "/dev/shm/rpcrdma-nfs-compare", "the directory all servers serve (tmpfs); created, and the bench file left in it")
	size := fs.String("size", "64m", "size of the file read and written")
	bin := fs.String("rpcrdma", "", "the rpcrdma command to use; default: build the one of this checkout")
	crc := fs.Bool("crc", true, "MPA CRC32c on over RDMA, for the NFS and the plain benches alike (-crc=false: off, as rpcrdma nfs bench and rpcrdma bench run by default)")
	fs.Parse(args)
	var crcFlag []string
	if *crc {
		crcFlag = []string{"--crc"}
	}
	if *rounds < 1 {
		return errors.New("-rounds: want at least 1")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gonfs-compare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		if *bin, err = buildRpcrdma(tmp); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	n, err := parseSize(*size)
	if err != nil {
		return fmt.Errorf("-size: %w", err)
	}
	if err := fillFile(filepath.Join(*dir, "rpcrdma-nfs-bench.dat"), n); err != nil {
		return err
	}
	servers, plainAddr, stop, err := startServers(*bin, self, *dir, crcFlag)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(os.Stderr, "%d rounds of %d cases against %d servers and rpcrdma bench, %v each, on %s\n",
		*rounds, len(nfsCases), len(servers), *duration, *dir)
	b := benchSetup{bin: *bin, duration: *duration, size: *size, crcFlag: crcFlag}
	s := samples{}
	for r := range *rounds {
		if err := b.round(s, r, servers, plainAddr); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "round %d of %d done\n", r+1, *rounds)
	}
	report(s, servers)
	return nil
}

// startServers starts, on ports of their own on 127.0.0.1, rpcrdma nfs
// serve (bin) over TCP and RDMA, go-nfs and the NFS server that copies
// no file data (self), all serving dir, and rpcrdma serve for the plain
// bench. Once all listen it returns the NFS servers as rpcrdma nfs bench
// reaches them (with crcFlag over RDMA), the address of rpcrdma serve,
// and stop, which kills them all; on failure it has killed those it
// started.
func startServers(bin, self, dir string, crcFlag []string) (servers []server, plainAddr string, stop func(), err error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, "", nil, err
	}
	cmds := []*exec.Cmd{
		exec.Command(bin, "nfs", "serve", "--log-level", "warn",
			"--tcp", "127.0.0.1:"+ports[0], "--rdma", "127.0.0.1:"+ports[1], dir),
		exec.Command(self, "serve", "-addr", "127.0.0.1:"+ports[2], dir),
		exec.Command(bin, "serve", "--log-level", "warn", "--listen", "127.0.0.1:"+ports[3]),
		exec.Command(self, "serve-nodata", "-tcp", "127.0.0.1:"+ports[4], "-rdma", "127.0.0.1:"+ports[5], dir),
	}
	var started []*exec.Cmd
	stop = func() {
		for _, c := range slices.Backward(started) {
			c.Process.Kill()
			c.Wait()
		}
	}
	for _, c := range cmds {
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			stop()
			return nil, "", nil, err
		}
		started = append(started, c)
	}
	for _, p := range ports {
		if err := waitListening("127.0.0.1:" + p); err != nil {
			stop()
			return nil, "", nil, err
		}
	}
	servers = []server{
		{"rpcrdma nfs serve, RDMA", append(crcFlag, "--transport", "rdma", "--nfs-port", ports[1], "--mount-port", ports[0], "127.0.0.1:/export")},
		{"rpcrdma nfs serve, TCP", []string{"--transport", "tcp", "--nfs-port", ports[0], "127.0.0.1:/export"}},
		{"go-nfs, TCP", []string{"--transport", "tcp", "--nfs-port", ports[2], "--export", "/", "127.0.0.1:/"}},
		{"rpcrdma nfs, RDMA, file data not copied", append(crcFlag, "--transport", "rdma", "--nfs-port", ports[5], "--mount-port", ports[4], "127.0.0.1:/export")},
	}
	return servers, "127.0.0.1:" + ports[3], stop, nil
}

// benchSetup is what every bench of a compare run shares: the rpcrdma
// command, each case's measuring time, the file's size, and the CRC flag
// for RDMA.
type benchSetup struct {
	bin      string
	duration time.Duration
	size     string
	crcFlag  []string
}

// round runs round r into s: the plain bench, alone and against
// rpcrdma serve at plainAddr, then every case against every server.
func (b benchSetup) round(s samples, r int, servers []server, plainAddr string) error {
	// Rotate the servers' order each round, so that none is always
	// measured first or right after the plain bench.
	order := slices.Clone(servers)
	for range r % len(order) {
		order = append(order[1:], order[0])
	}
	for _, p := range []struct{ key, connect string }{{"plain", ""}, {"served", plainAddr}} {
		w, rd, err := plainBench(b.bin, p.connect, b.duration, b.crcFlag)
		if err != nil {
			return err
		}
		s.add(p.key+" WRITE", w)
		s.add(p.key+" READ", rd)
	}
	for _, sv := range order {
		for _, c := range nfsCases {
			v, err := nfsBench(b.bin, sv, c, b.duration, b.size)
			if err != nil {
				return fmt.Errorf("%s against %s: %w", c.name, sv.name, err)
			}
			s.add(c.name+"|"+sv.name, v)
		}
	}
	return nil
}

func (s samples) add(k string, v float64) { s[k] = append(s[k], v) }

// ratio returns a/b per round.
func (s samples) ratio(a, b string) []float64 {
	out := make([]float64, len(s[a]))
	for i := range out {
		out[i] = s[a][i] / s[b][i]
	}
	return out
}

// stat renders the median and range of v with prec decimals.
func stat(v []float64, prec int) string {
	v = slices.Clone(v)
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	f := "%." + strconv.Itoa(prec) + "f"
	return fmt.Sprintf(f+" ("+f+"-"+f+")", med, v[0], v[len(v)-1])
}

func report(s samples, servers []server) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "case")
	for _, sv := range servers {
		fmt.Fprint(tw, "\t"+sv.name)
	}
	fmt.Fprintln(tw, "\trpcrdma bench, RDMA (no NFS)\trpcrdma bench --connect (rpcrdma serve)\t")
	for _, c := range nfsCases {
		fmt.Fprint(tw, c.name)
		for _, sv := range servers {
			unit := " MB/s"
			if c.iops {
				unit = " IOPS"
			}
			fmt.Fprint(tw, "\t"+stat(s[c.name+"|"+sv.name], 0)+unit)
		}
		switch {
		case strings.Contains(c.name, "WRITE"):
			fmt.Fprint(tw, "\t"+stat(s["plain WRITE"], 0)+" MB/s\t"+stat(s["served WRITE"], 0)+" MB/s")
		case !c.iops:
			fmt.Fprint(tw, "\t"+stat(s["plain READ"], 0)+" MB/s\t"+stat(s["served READ"], 0)+" MB/s")
		default:
			fmt.Fprint(tw, "\t-\t-")
		}
		fmt.Fprintln(tw, "\t")
	}
	tw.Flush()
	fmt.Println("\nratios, each taken within a round (median and range):")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	rdma, tcp, gonfs, nodata := servers[0].name, servers[1].name, servers[2].name, servers[3].name
	for _, c := range nfsCases {
		if !c.iops {
			op := " READ"
			if strings.Contains(c.name, "WRITE") {
				op = " WRITE"
			}
			fmt.Fprintf(tw, "%s: NFS over RDMA / rpcrdma bench\t%s\t(target at least 0.8)\n", c.name, stat(s.ratio(c.name+"|"+rdma, "plain"+op), 2))
			fmt.Fprintf(tw, "%s: NFS over RDMA / rpcrdma bench --connect\t%s\t(client and server in two processes, as for NFS)\n", c.name, stat(s.ratio(c.name+"|"+rdma, "served"+op), 2))
			fmt.Fprintf(tw, "%s: NFS over RDMA, file data not copied / rpcrdma bench\t%s\t(the NFS layer, in two processes)\n", c.name, stat(s.ratio(c.name+"|"+nodata, "plain"+op), 2))
			fmt.Fprintf(tw, "%s: NFS over RDMA, file data not copied / rpcrdma bench --connect\t%s\t(the NFS layer, against two processes)\n", c.name, stat(s.ratio(c.name+"|"+nodata, "served"+op), 2))
			fmt.Fprintf(tw, "%s: NFS over RDMA / NFS over RDMA, file data not copied\t%s\t(what copying the file's data costs)\n", c.name, stat(s.ratio(c.name+"|"+rdma, c.name+"|"+nodata), 2))
		}
		target := "3"
		if c.iops {
			target = "1.5"
		}
		fmt.Fprintf(tw, "%s: NFS over RDMA / go-nfs\t%s\t(target at least %s)\n", c.name, stat(s.ratio(c.name+"|"+rdma, c.name+"|"+gonfs), 2), target)
		fmt.Fprintf(tw, "%s: NFS over TCP / go-nfs\t%s\t\n", c.name, stat(s.ratio(c.name+"|"+tcp, c.name+"|"+gonfs), 2))
	}
	tw.Flush()
}

// nfsBench runs one case against one server and returns its MB/s, or its
// ops/s for an IOPS case.
func nfsBench(bin string, sv server, c nfsCase, d time.Duration, size string) (float64, error) {
	args := append([]string{"nfs", "bench", "--json", "--duration", d.String(), "--size", size}, c.args...)
	args = append(args, sv.args...)
	var out struct {
		Results []struct {
			OpsPerSec float64 `json:"ops_per_sec"`
			MBPerSec  float64 `json:"mb_per_sec"`
		} `json:"results"`
	}
	if err := runJSON(bin, args, &out); err != nil {
		return 0, err
	}
	if len(out.Results) != 1 {
		return 0, fmt.Errorf("rpcrdma nfs bench gave %d results, want 1", len(out.Results))
	}
	if c.iops {
		return out.Results[0].OpsPerSec, nil
	}
	return out.Results[0].MBPerSec, nil
}

// plainBench runs `rpcrdma bench` once, against its in-process server or,
// with connect, against `rpcrdma serve` there, and returns its 1 MiB WRITE
// and READ MB/s over RDMA with 4 calls outstanding.
func plainBench(bin, connect string, d time.Duration, crcFlag []string) (write, read float64, err error) {
	var out struct {
		Results []struct {
			Transport   string  `json:"transport"`
			Op          string  `json:"op"`
			Size        int     `json:"size"`
			Outstanding int     `json:"outstanding"`
			MBPerSec    float64 `json:"mb_per_sec"`
		} `json:"results"`
	}
	args := append([]string{"bench", "--json", "--rounds", "1", "--duration", d.String()}, crcFlag...)
	if connect != "" {
		args = append(args, "--connect", connect)
	}
	if err := runJSON(bin, args, &out); err != nil {
		return 0, 0, err
	}
	for _, r := range out.Results {
		if r.Transport == "rdma" && r.Size == 1<<20 && r.Outstanding == 4 {
			switch r.Op {
			case "WRITE":
				write = r.MBPerSec
			case "READ":
				read = r.MBPerSec
			}
		}
	}
	if write == 0 || read == 0 {
		return 0, 0, errors.New("rpcrdma bench: no rdma 1 MiB WRITE and READ with 4 outstanding in its results")
	}
	return write, read, nil
}

// runJSON runs bin with args, bounded in time, and decodes its standard
// output into v.
func runJSON(bin string, args []string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return json.Unmarshal(stdout.Bytes(), v)
}

// buildRpcrdma builds the rpcrdma command of the checkout this module
// lies in (two directories up) into dir.
func buildRpcrdma(dir string) (string, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return "", err
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.HasPrefix(b, []byte("module github.com/go-rpcrdma/rpcrdma\n")) {
		return "", errors.New("run compare in bench/gonfs of a go-rpcrdma checkout, or give -rpcrdma")
	}
	bin := filepath.Join(dir, "rpcrdma")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rpcrdma")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	return bin, cmd.Run()
}

// freePorts returns n TCP ports on 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]string, error) {
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}

// waitListening waits up to 30 s for addr to accept a TCP connection.
func waitListening(addr string) error {
	for range 300 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("nothing listening on %s after 30 s", addr)
}

// parseSize reads a byte count with an optional k, m or g suffix, as
// `rpcrdma nfs bench --size` does.
func parseSize(v string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "k"):
		mult, v = 1<<10, strings.TrimSuffix(v, "k")
	case strings.HasSuffix(v, "m"):
		mult, v = 1<<20, strings.TrimSuffix(v, "m")
	case strings.HasSuffix(v, "g"):
		mult, v = 1<<30, strings.TrimSuffix(v, "g")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive count of bytes, with k, m or g", v)
	}
	return n * mult, nil
}

// fillFile makes the bench file at least size bytes long, written out
// rather than a hole, before any server is measured: the server that
// leaves file data alone cannot extend it, and a hole reads from the
// zero page, which is faster than the data a WRITE left.
func fillFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := fi.Size(); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Close()
}
