// Command linkemu puts an emulated network link (internal/linkemu)
// between a client and a TCP target on loopback, for make bench-* and the
// browser e2e tests (issue 40): one-way delay, jitter, bandwidth and a
// bottleneck queue, set for both directions at once or each on its own.
//
//	linkemu -target 127.0.0.1:7681 -rtt 200ms -rate 100mbit
//
// It listens on 127.0.0.1 (port -listen, default any free one), prints
// "linkemu listening on ADDR" on stdout once it accepts, and runs until
// SIGINT or SIGTERM. It refuses a target that is not a loopback address:
// load and fault tests only ever run against loopback.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/ahp-dev/ahpd/internal/linkemu"
	"github.com/ahp-dev/ahpd/internal/units"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "linkemu:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("linkemu", flag.ContinueOnError)
	target := fs.String("target", "", "the `host:port` to forward to (loopback only)")
	listen := fs.String("listen", "127.0.0.1:0", "the loopback `address` to listen on")
	rtt := fs.Duration("rtt", 0, "round trip added: half of it each way")
	jitter := fs.Duration("jitter", 0, "jitter each way (uniform in ±jitter, order kept)")
	rate := fs.String("rate", "", "bandwidth each way: e.g. 100mbit, 12.5MB (bytes/s); empty: unlimited")
	upRate := fs.String("up-rate", "", "bandwidth client→target, when it differs from -rate")
	queue := fs.String("queue", "", "bottleneck buffer each way in bytes (e.g. 256KiB); empty: one bandwidth-delay product, at least 64 KiB")
	seed := fs.Uint64("seed", 1, "jitter seed")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		return err
	}
	if *target == "" {
		return errors.New("-target host:port is required")
	}
	host, _, err := net.SplitHostPort(*target)
	if err != nil {
		return fmt.Errorf("-target %q: %v", *target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-target %q: only loopback targets", *target)
	}
	down := linkemu.Params{Delay: *rtt / 2, Jitter: *jitter, Seed: *seed}
	if *rate != "" { // empty: unlimited
		if down.Rate, err = linkemu.ParseRate(*rate); err != nil {
			return fmt.Errorf("-rate %v", err)
		}
	}
	up := down
	if *upRate != "" {
		if up.Rate, err = linkemu.ParseRate(*upRate); err != nil {
			return fmt.Errorf("-up-rate %v", err)
		}
	}
	for _, p := range []*linkemu.Params{&up, &down} {
		if *queue != "" {
			if p.Queue, err = units.ParseSize(*queue); err != nil {
				return fmt.Errorf("-queue: %v", err)
			}
		} else if p.Rate > 0 {
			p.Queue = max(int64(float64(p.Rate)*rtt.Seconds()), 64<<10)
		}
	}
	l, err := linkemu.StartOn(*listen, *target, up, down)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("linkemu listening on %s\n", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
