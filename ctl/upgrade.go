package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

const daemonUpgradeHelp = `The daemon checks the new binary first (it runs it once with --upgrade-check,
which reads the state it would be handed and the config); one that is missing,
not executable, not ahpd or of an incompatible state version is refused with
the reason, and the daemon serves on untouched (exit status 1). Then viewers
are disconnected with 1012 "host upgrading" (the web page and ahpctl attach
reconnect by themselves), TCP channels close, and the daemon re-executes
itself in place: the same PID, its terminals and their programs kept,
telemetry channels with their history, its listeners open throughout (a
connect meanwhile waits). ahpctl waits until the new binary answers and
prints its version. Should the new binary refuse the state itself (its
second check, after the hand-over began), the daemon re-executes itself
with that state and keeps its channels: ahpctl says so, with the reason,
and exits 1.

Without --binary it is the path the daemon was started from, as it is on disk
now: upgrade the package, then run this. SIGUSR2 does the same.`

// upgradeView is what daemon upgrade prints with -o json or yaml.
type upgradeView struct {
	Binary   string        `json:"binary"`
	Pid      int64         `json:"pid"`
	Version  string        `json:"version"`
	Upgrades int64         `json:"upgrades"`
	Took     time.Duration `json:"tookNanoseconds"`
}

func setupDaemonUpgrade(fs *flag.FlagSet) action {
	o := outputFlag(fs)
	bin := fs.String("binary", "", "the new ahpd `path` (default: the path the daemon was started from)")
	wait := fs.Duration("wait", time.Minute, "how long to wait for the new binary to answer")
	return func(ctx context.Context, a *app, _ []string) error {
		if err := checkOutput(*o); err != nil {
			return err
		}
		path := *bin
		if path != "" {
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			path = abs
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		before, err := c.daemon.GetInfo(rctx, &ahpv1.GetInfoRequest{})
		if err != nil {
			return err
		}
		var refusedBefore time.Time
		if r := before.GetUpgradeRefused(); r != nil {
			refusedBefore = r.Time.AsTime()
		}
		start := time.Now()
		res, err := c.daemon.Upgrade(rctx, &ahpv1.UpgradeRequest{Binary: path})
		if err != nil {
			if st, ok := status.FromError(err); ok && st.Code() == codes.FailedPrecondition {
				return fmt.Errorf("daemon upgrade: %s; the daemon serves on", st.Message())
			}
			return err
		}
		// The hand-over has begun: the control socket stays, and the new
		// binary answers on it once it has taken over.
		deadline := time.Now().Add(*wait)
		for {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := c.daemon.GetInfo(cctx, &ahpv1.GetInfoRequest{})
			ccancel()
			if r := info.GetUpgradeRefused(); err == nil && r.GetAfterHandOver() && r.Time.AsTime().After(refusedBefore) {
				// The new binary refused the state itself: the daemon
				// re-executed itself with it.
				if info.Pid != before.Pid {
					return fmt.Errorf("daemon upgrade: the daemon answering is pid %d, not %d", info.Pid, before.Pid)
				}
				return fmt.Errorf("daemon upgrade: refused after the hand-over began: %s; the daemon took its channels back and serves on (pid %d, ahpd %s)", r.Reason, info.Pid, info.Version)
			}
			if err == nil && info.Upgrades >= res.Upgrades {
				if info.Pid != before.Pid {
					return fmt.Errorf("daemon upgrade: the daemon answering is pid %d, not %d", info.Pid, before.Pid)
				}
				v := upgradeView{Binary: res.Binary, Pid: info.Pid, Version: info.Version, Upgrades: info.Upgrades, Took: time.Since(start)}
				if structured(*o) {
					return a.printAs(*o, v)
				}
				fmt.Fprintf(a.stdout, "upgraded in place to ahpd %s from %s (pid %d, upgrade %d, %v)\n", v.Version, v.Binary, v.Pid, v.Upgrades, v.Took.Round(time.Millisecond))
				return nil
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = errors.New("still the old binary")
				}
				return fmt.Errorf("daemon upgrade: the new binary did not answer within %v: %v (see the daemon's log)", *wait, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
