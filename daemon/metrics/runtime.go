package metrics

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/telemetry"
)

// The Go runtime's and the process's figures, under the names, types and
// meanings of Prometheus' Go client (its Go and process collectors), so
// that dashboards made for Go programs work.

func memDesc(name, typ, help string) *desc { return newDesc(typ, "go_memstats_"+name, help) }

var (
	descGoGoroutines = newDesc(gauge, "go_goroutines", "Number of goroutines that currently exist.")
	descGoThreads    = newDesc(gauge, "go_threads", "Number of OS threads created.")
	descGoInfo       = newDesc(gauge, "go_info", "Information about the Go environment.", "version")
	descGoMaxProcs   = newDesc(gauge, "go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.")
	descGoGOGC       = newDesc(gauge, "go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.")
	descGoMemLimit   = newDesc(gauge, "go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.")
	descGoGC         = newDesc(summary, "go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")

	memStats = []struct {
		d *desc
		v func(*runtime.MemStats) float64
	}{
		{memDesc("alloc_bytes", gauge, "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes."), func(m *runtime.MemStats) float64 { return float64(m.Alloc) }},
		{memDesc("alloc_bytes_total", counter, "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes."), func(m *runtime.MemStats) float64 { return float64(m.TotalAlloc) }},
		{memDesc("sys_bytes", gauge, "Number of bytes obtained from system. Equals to /memory/classes/total:byte."), func(m *runtime.MemStats) float64 { return float64(m.Sys) }},
		{memDesc("mallocs_total", counter, "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects."), func(m *runtime.MemStats) float64 { return float64(m.Mallocs) }},
		{memDesc("frees_total", counter, "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects."), func(m *runtime.MemStats) float64 { return float64(m.Frees) }},
		{memDesc("heap_alloc_bytes", gauge, "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes."), func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) }},
		{memDesc("heap_sys_bytes", gauge, "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes."), func(m *runtime.MemStats) float64 { return float64(m.HeapSys) }},
		{memDesc("heap_idle_bytes", gauge, "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes."), func(m *runtime.MemStats) float64 { return float64(m.HeapIdle) }},
		{memDesc("heap_inuse_bytes", gauge, "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes"), func(m *runtime.MemStats) float64 { return float64(m.HeapInuse) }},
		{memDesc("heap_released_bytes", gauge, "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes."), func(m *runtime.MemStats) float64 { return float64(m.HeapReleased) }},
		{memDesc("heap_objects", gauge, "Number of currently allocated objects. Equals to /gc/heap/objects:objects."), func(m *runtime.MemStats) float64 { return float64(m.HeapObjects) }},
		{memDesc("stack_inuse_bytes", gauge, "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes."), func(m *runtime.MemStats) float64 { return float64(m.StackInuse) }},
		{memDesc("stack_sys_bytes", gauge, "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes."), func(m *runtime.MemStats) float64 { return float64(m.StackSys) }},
		{memDesc("mspan_inuse_bytes", gauge, "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes."), func(m *runtime.MemStats) float64 { return float64(m.MSpanInuse) }},
		{memDesc("mspan_sys_bytes", gauge, "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes."), func(m *runtime.MemStats) float64 { return float64(m.MSpanSys) }},
		{memDesc("mcache_inuse_bytes", gauge, "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes."), func(m *runtime.MemStats) float64 { return float64(m.MCacheInuse) }},
		{memDesc("mcache_sys_bytes", gauge, "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes."), func(m *runtime.MemStats) float64 { return float64(m.MCacheSys) }},
		{memDesc("buck_hash_sys_bytes", gauge, "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes."), func(m *runtime.MemStats) float64 { return float64(m.BuckHashSys) }},
		{memDesc("gc_sys_bytes", gauge, "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes."), func(m *runtime.MemStats) float64 { return float64(m.GCSys) }},
		{memDesc("other_sys_bytes", gauge, "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes."), func(m *runtime.MemStats) float64 { return float64(m.OtherSys) }},
		{memDesc("next_gc_bytes", gauge, "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes."), func(m *runtime.MemStats) float64 { return float64(m.NextGC) }},
		{memDesc("last_gc_time_seconds", gauge, "Number of seconds since 1970 of last garbage collection."), func(m *runtime.MemStats) float64 { return float64(m.LastGC) / 1e9 }},
	}
)

// goRuntime adds the Go runtime's figures.
func goRuntime(e *exposition) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, m := range memStats {
		e.add(m.d, m.v(&ms))
	}
	e.add(descGoGoroutines, float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	e.add(descGoThreads, float64(threads))
	e.add(descGoInfo, 1, runtime.Version())
	samples := []rtmetrics.Sample{{Name: "/sched/gomaxprocs:threads"}, {Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	rtmetrics.Read(samples)
	for i, d := range []*desc{descGoMaxProcs, descGoGOGC, descGoMemLimit} {
		if samples[i].Value.Kind() == rtmetrics.KindUint64 {
			e.add(d, float64(samples[i].Value.Uint64()))
		}
	}
	gc := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&gc)
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		e.addPairs(descGoGC, "", [][2]string{{"quantile", q}}, gc.PauseQuantiles[i].Seconds())
	}
	e.addPairs(descGoGC, "_sum", nil, gc.PauseTotal.Seconds())
	e.addPairs(descGoGC, "_count", nil, float64(gc.NumGC))
}

var (
	descProcCPU      = newDesc(counter, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")
	descProcOpenFDs  = newDesc(gauge, "process_open_fds", "Number of open file descriptors.")
	descProcMaxFDs   = newDesc(gauge, "process_max_fds", "Maximum number of open file descriptors.")
	descProcVirtual  = newDesc(gauge, "process_virtual_memory_bytes", "Virtual memory size in bytes.")
	descProcVirtMax  = newDesc(gauge, "process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.")
	descProcResident = newDesc(gauge, "process_resident_memory_bytes", "Resident memory size in bytes.")
	descProcStart    = newDesc(gauge, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.")
	descProcNetRx    = newDesc(counter, "process_network_receive_bytes_total", "Number of bytes received by the process over the network.")
	descProcNetTx    = newDesc(counter, "process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.")

	// started is when this package was initialised, a few milliseconds
	// after the process started.
	started = time.Now()
)

// process adds the process's figures; one it cannot read is left out.
func process(e *exposition) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		e.add(descProcCPU, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds())
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.add(descProcOpenFDs, float64(len(fds)))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		e.add(descProcMaxFDs, float64(rl.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil {
		e.add(descProcVirtMax, float64(rl.Cur))
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if size, resident, ok := parseStatm(string(b)); ok {
			page := float64(os.Getpagesize())
			e.add(descProcVirtual, float64(size)*page)
			e.add(descProcResident, float64(resident)*page)
		}
	}
	e.add(descProcStart, float64(started.UnixNano())/1e9)
	// As Prometheus' client counts them: every interface of the process's
	// network namespace (loopback included), not this process alone.
	if b, err := os.ReadFile("/proc/self/net/dev"); err == nil {
		if rx, tx, ok := telemetry.NetDevTotals(b); ok {
			e.add(descProcNetRx, float64(rx))
			e.add(descProcNetTx, float64(tx))
		}
	}
}

// parseStatm reads the first two fields of /proc/PID/statm: the virtual
// size and the resident set, in pages.
func parseStatm(s string) (size, resident uint64, ok bool) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, 0, false
	}
	size, err1 := strconv.ParseUint(f[0], 10, 64)
	resident, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || size > math.MaxInt64 || resident > math.MaxInt64 {
		return 0, 0, false
	}
	return size, resident, true
}
