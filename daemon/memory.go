package daemon

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/internal/afterfunc"
)

// memoryReturnDelay is how long after a terminal or a connection ended
// the daemon hands its free memory back to the system: long enough to
// batch a burst of ends into one collection, short enough that a `cat`
// of a large file leaves no peak in RSS behind.
const memoryReturnDelay = time.Second

// memoryReturner returns free memory to the system soon after a load
// ended. The Go runtime would keep the heap it grew to until the next
// collection, and an idle daemon collects only every two minutes, so
// after a flood RSS stayed at its peak (issue 12: 38 → 236 MiB). One
// forced collection a second at most costs little: the live heap of an
// idle daemon is a few MiB.
type memoryReturner struct {
	t *afterfunc.Timer

	mu      sync.Mutex // guards armed, stopped and calls of t.Reset
	armed   bool
	stopped bool

	returns atomic.Int64 // returns done (ahpd_memory_returns_total)
}

func newMemoryReturner() *memoryReturner {
	m := &memoryReturner{}
	m.t = afterfunc.New(func() {
		m.mu.Lock()
		m.armed = false
		m.mu.Unlock()
		// Two collections: the buffer pools (sync.Pools) keep what they
		// hold through one (their victim cache), and after a flood they
		// hold the viewers' message and frame buffers, up to a few
		// hundred KiB per viewer.
		runtime.GC()
		debug.FreeOSMemory()
		m.returns.Add(1)
	})
	return m
}

// Returns counts the returns done so far: a test or a benchmark that
// measures idle memory waits for the next one instead of sleeping.
func (m *memoryReturner) Returns() int64 { return m.returns.Load() }

// soon schedules a return, unless one is pending.
func (m *memoryReturner) soon() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.armed || m.stopped {
		return
	}
	m.armed = true
	m.t.Reset(memoryReturnDelay)
}

// stop cancels a pending return and waits for one under way.
func (m *memoryReturner) stop() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.t.Stop()
}

// MemoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit) the
// daemon sets from its budgets: everything its connections may hold
// (maxTotalBufferedBytes), twice for the collector's headroom, plus 256 MiB
// for terminals, their emulators and the runtime. Near it the collector
// works harder instead of letting the heap double; it is soft, so the
// daemon never fails for it.
func MemoryLimit(cfg config.Config) int64 {
	cfg = cfg.WithDefaults()
	return 2*cfg.MaxTotalBufferedBytes + 256<<20
}
