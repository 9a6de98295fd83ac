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
	"strconv"
	"strings"
	"syscall"

	"github.com/ahp-dev/ahpd/internal/linkemu"
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
	if down.Rate, err = parseRate(*rate); err != nil {
		return err
	}
	up := down
	if *upRate != "" {
		if up.Rate, err = parseRate(*upRate); err != nil {
			return err
		}
	}
	for _, p := range []*linkemu.Params{&up, &down} {
		if *queue != "" {
			if p.Queue, err = parseBytes(*queue); err != nil {
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

// parseRate reads a bandwidth: N with a unit of bit/s (kbit, mbit, gbit)
// or of bytes/s (B, KB, MB, GB, KiB, MiB, GiB).
func parseRate(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	l := strings.ToLower(s)
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"bit", 1.0 / 8}} {
		if num, ok := strings.CutSuffix(l, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f <= 0 {
				return 0, fmt.Errorf("rate %q: want e.g. 100mbit", s)
			}
			return int64(f * u.mult), nil
		}
	}
	n, err := parseBytes(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("rate %q: want e.g. 100mbit or 12MB (bytes/s)", s)
	}
	return n, nil
}

func parseBytes(s string) (int64, error) {
	l := strings.ToLower(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1}} {
		if num, ok := strings.CutSuffix(l, u.suffix); ok {
			l, mult = num, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(l, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q: want a size such as 256KiB", s)
	}
	return int64(f * mult), nil
}
