package daemon_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/ctl/client"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestIdleViewerMemory: what an idle viewer costs the daemon (issue 17:
// ≤ 64 KiB per idle viewer, with compression negotiated and used). The
// ahpd binary (built without -race, so its memory is the deployed one's)
// runs with permessage-deflate; 100 viewers, each on a WebSocket of its
// own that offers permessage-deflate, subscribe to a terminal, are each
// sent a few KiB of output in messages above the compression threshold,
// and each send a message large enough to be compressed too. Then they
// idle. The daemon's live heap and goroutine stacks after a collection
// (figures the garbage collector settles, not timings), less the same
// daemon's before the viewers, over the viewers: at most 40 KiB of heap
// and 64 KiB of heap and stacks each (measured: 31 and 60). A flate
// writer kept per connection (context takeover) cost 1.3 MiB of heap
// each; the frame, inbound and socket buffers kept idle, about 100 KiB.
func TestIdleViewerMemory(t *testing.T) {
	const viewers = 100
	bin := buildBins(t, false)
	d := startMetricsDaemon(t, bin, "", "--websocket-compression", "deflate")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	token := d.adminToken(t)
	url := strings.Replace(d.base, "http://", "ws://", 1) + "/v1/ws"
	// settle lets the daemon's memory returner run (a connection's end
	// arms it: a collection 1 s later) three times, so that the pools
	// (sync.Pool: a pooled flate writer is 1.2 MB) are empty as well; it
	// waits for each by ahpd_memory_returns_total.
	settle := func() (heap, stacks int64) {
		t.Helper()
		var m map[string]float64
		for range 3 {
			before := d.metrics(t, "ahpd_memory_returns_total")["ahpd_memory_returns_total"]
			c, _, err := client.Dial(ctx, url, client.Options{Token: token})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			// The heap is read in the scrape that first sees the return,
			// as one scrape 1.5 s after the close did: the garbage of the
			// scrapes before it went with the return's collection.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				m = d.metrics(t, "ahpd_memory_returns_total", "go_memstats_heap_alloc_bytes", "go_memstats_stack_inuse_bytes")
				if m["ahpd_memory_returns_total"] != before {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the daemon never returned its memory after a connection ended (ahpd_memory_returns_total)")
				}
			}
		}
		return int64(m["go_memstats_heap_alloc_bytes"]), int64(m["go_memstats_stack_inuse_bytes"])
	}
	r, err := d.terms.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "idle", Command: "/bin/sh",
		Args: []string{"-c", `read x; i=0; while [ $i -lt 150 ]; do echo "line $i of the output, the quick brown fox jumps over the lazy dog"; i=$((i+1)); done; printf 'ALL%sDONE\n' X; exec sleep 600`}})
	if err != nil {
		t.Fatal(err)
	}
	uri := r.GetChannel().GetUri()
	heap0, stacks0 := settle()

	subs := make([]*client.Sub, viewers)
	for i := range subs {
		c, _, err := client.Dial(ctx, url, client.Options{Token: token, Deflate: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if subs[i], err = c.Subscribe(ctx, uri, nil); err != nil {
			t.Fatal(err)
		}
		if err := termbench.UntilReady(ctx, subs[i]); err != nil {
			t.Fatal(err)
		}
		// Compressed by the client (512 bytes and more), as a browser
		// compresses every message: an unknown method, answered with an
		// error.
		if err := c.Call(ctx, "test/pad", map[string]string{"pad": strings.Repeat("x", 600)}, nil); err == nil {
			t.Fatal("test/pad: no error")
		}
	}
	if err := subs[0].Send(ctx, termbench.Input("\r")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, viewers)
	for _, sub := range subs {
		wg.Go(func() {
			if _, _, err := termbench.Drain(ctx, sub, "ALLXDONE"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	st, err := ahpv1.NewDaemonServiceClient(grpcConn(t, filepath.Join(d.dir, "c.sock"))).GetStats(ctx, &ahpv1.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out, wire int64
	for _, c := range st.GetConnections() {
		out += c.GetCounters().GetBytesOut()
		wire += c.GetCounters().GetWireBytesOut()
	}
	if len(st.GetConnections()) != viewers || wire*2 > out {
		t.Fatalf("%d connections sent %d bytes in %d on the wire: want %d, compressed to less than half", len(st.GetConnections()), out, wire, viewers)
	}

	heap, stacks := settle()
	perHeap := float64(heap-heap0) / viewers / 1024
	perBoth := float64(heap+stacks-heap0-stacks0) / viewers / 1024
	t.Logf("%d idle viewers (compressed: %d message bytes, %d on the wire): live heap %.1f → %.1f MiB, stacks %d → %d KiB; per viewer %.1f KiB of heap, %.1f KiB with stacks",
		viewers, out, wire, float64(heap0)/(1<<20), float64(heap)/(1<<20), stacks0>>10, stacks>>10, perHeap, perBoth)
	if perHeap > 40 || perBoth > 64 {
		t.Fatalf("an idle viewer costs %.1f KiB of heap, %.1f KiB with its goroutines' stacks: want at most 40 and 64", perHeap, perBoth)
	}
}
