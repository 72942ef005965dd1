// Command rpcrdma serves, probes, benchmarks and traces RPC-over-RDMA.
//
//	rpcrdma serve [flags]          serve the bench program over the software iWARP
//	rpcrdma ping [flags] ADDR      NULL calls; print what the connection negotiated
//	rpcrdma bench [flags]          throughput and latency, with TCP baselines
//	rpcrdma trace [flags] FILE     decode a pcap/pcapng capture layer by layer
//
// Run "rpcrdma COMMAND --help" for each command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

// commands lists the commands; those that stop on SIGINT and SIGTERM
// take ctx, which ends at the first of them.
func commands(ctx context.Context) []command {
	return []command{
		{"serve", "serve the bench program, NULL and CONF_RDMA over the software iWARP", cmdServe},
		{"ping", "call NULL and print what the connection negotiated", cmdPing},
		{"bench", "measure throughput and latency against TCP baselines", cmdBench},
		{"trace", "decode MPA, DDP, RDMAP, RPC-over-RDMA and ONC RPC in a capture", cmdTrace},
		{"nfs", "NFSv3 over RDMA or TCP: probe, ls, cat, cp, bench, serve", func(args []string, stdout, stderr io.Writer) error {
			return cmdNFS(ctx, args, stdout, stderr)
		}},
		{"version", "print the version, the Go it was built with and the RDMA providers built in", cmdVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rpcrdma COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "RPC-over-RDMA (RFC 5666, RFC 8797, Version Two draft) over a pure-Go iWARP.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands(context.Background()) {
		fmt.Fprintf(w, "  %-6s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "rpcrdma COMMAND --help" for a command's flags.`)
}

// run dispatches; it returns the process exit status: 0 on success, 1 on
// a failure, 2 on a usage error, and 128 plus the signal's number when a
// SIGINT or SIGTERM (ending ctx, see signalContext) stopped the command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range commands(ctx) {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		name := c.name
		if ne, ok := errors.AsType[*namedError](err); ok {
			name = ne.name
		}
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			if err != errUsage { // not yet said
				fmt.Fprintf(stderr, "rpcrdma %s: %v\n", name, err)
			}
			return 2
		}
		if sig, ok := errors.AsType[*signalError](context.Cause(ctx)); ok {
			if errors.Is(err, context.Canceled) || errors.Is(err, sig) {
				fmt.Fprintf(stderr, "rpcrdma %s: stopped by %v\n", name, sig.sig)
			} else { // what the command says of its stop
				fmt.Fprintf(stderr, "rpcrdma %s: %v\n", name, err)
			}
			return 128 + sig.number()
		}
		fmt.Fprintf(stderr, "rpcrdma %s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "rpcrdma: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// errUsage: the flags or arguments were wrong, and that has been said;
// the command exits 2.
var errUsage = errors.New("usage")

// usageError is a wrong flag value or argument not yet reported: run
// prints it and exits 2, as for a flag the flag package refused.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

// usagef returns a usageError with the message format describes.
func usagef(format string, a ...any) error {
	return &usageError{fmt.Sprintf(format, a...)}
}

// noArgs refuses positional arguments for a command that takes none.
func noArgs(fs *flag.FlagSet, hint string) error {
	if fs.NArg() == 0 {
		return nil
	}
	return usagef("unexpected argument %q: %s takes no arguments%s", fs.Arg(0), fs.Name(), hint)
}

// newFlags returns a FlagSet for a command that prints its usage to stderr.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFor(fs, synopsis)
	fs.Bool("help-all", false, "print every flag with its description")
	return fs
}

// parse parses args, mapping flag errors to errUsage. A flag the
// command does not know, or a value it cannot take, is said in one line
// with the command's prefix, as every other message, before the usage.
func parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package's own report, unprefixed
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(out, "rpcrdma %s: %v\n", fs.Name(), err)
		}
		fs.Usage()
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if f := fs.Lookup("help-all"); f != nil && f.Value.String() == "true" {
		printAll(fs)
		return flag.ErrHelp
	}
	return nil
}

// namedError is an error of a subcommand, which run prefixes with the
// subcommand's whole name ("rpcrdma nfs cp: ...").
type namedError struct {
	name string
	err  error
}

func (e *namedError) Error() string { return e.err.Error() }
func (e *namedError) Unwrap() error { return e.err }

// signalError is the cause of a context a signal ended.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "stopped by " + e.sig.String() }

// number is the signal's number, for the exit status 128+n shells use.
func (e *signalError) number() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGINT)
}

// signalContext returns a context that the first SIGINT or SIGTERM ends,
// with a *signalError as its cause; after it, the signals have their
// default effect again, so a second Ctrl-C ends a command that is slow to
// stop. stop releases the signals.
func signalContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&signalError{s})
		case <-done:
		}
	}()
	return ctx, func() { signal.Stop(ch); close(done); cancel(nil) }
}

func main() {
	ctx, stop := signalContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
