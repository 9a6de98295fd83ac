package telemetry

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

const (
	statFixture = "cpu  10 1 20 300 4 5 6 7 8 9\ncpu0 5 0 10 150 2 2 3 3 4 4\ncpu1 5 1 10 150 2 3 3 4 4 5\n" +
		"intr 1 2 3\nctxt 99\nbtime 1700000000\nprocesses 10\n"
	netDevFixture = "Inter-|   Receive                                                |  Transmit\n" +
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n" +
		"    lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\n" +
		"  eth0:12345 20 0 0 0 0 0 0 67890 30 0 0 0 0 0 0\n"
	diskFixture = "   8       0 sda 100 2 2048 30 50 1 4096 60 0 90 90 0 0 0 0 0 0\n" +
		" 259       0 nvme0n1 1 0 8 0 2 0 16 0 0 0 0\n" +
		"   7       0 loop0 1 0\n"
	// comm holds a space and parentheses, as a program may name itself.
	procStatFixture = "4242 (my (odd) cmd) S 1 4242 4242 34816 4300 4194304 100 0 0 0 250 50 0 0 20 0 3 0 123456 10000000 789 18446744073709551615\n"
)

func TestParseProcFiles(t *testing.T) {
	total, cpus, ok := parseStat([]byte(statFixture))
	if !ok || total != (cpuTimes{10, 1, 20, 300, 4, 5, 6, 7}) || len(cpus) != 2 || cpus[1] != (cpuTimes{5, 1, 10, 150, 2, 3, 3, 4}) {
		t.Errorf("parseStat = %+v, %+v, %v", total, cpus, ok)
	}
	if _, _, ok := parseStat([]byte("cpu0 1 2 3 4\n")); ok {
		t.Error("parseStat without a total line: ok")
	}

	mt, ma := parseMeminfo([]byte("MemTotal:       2048 kB\nMemFree:  1 kB\nMemAvailable:    1024 kB\n"))
	if mt != 2048*1024 || ma != 1024*1024 {
		t.Errorf("parseMeminfo = %v, %v", mt, ma)
	}
	if mt, ma := parseMeminfo([]byte("MemFree: 1 kB\n")); mt != -1 || ma != -1 {
		t.Errorf("parseMeminfo without the fields = %v, %v; want -1, -1", mt, ma)
	}

	if l, ok := parseLoadavg([]byte("0.50 1.25 10.00 2/345 6789\n")); !ok || l != [3]float64{0.5, 1.25, 10} {
		t.Errorf("parseLoadavg = %v, %v", l, ok)
	}
	if _, ok := parseLoadavg([]byte("0.5 x 1\n")); ok {
		t.Error("parseLoadavg of a bad field: ok")
	}

	nd := parseNetDev([]byte(netDevFixture))
	if len(nd) != 2 || nd["lo"] != [2]uint64{1000, 1000} || nd["eth0"] != [2]uint64{12345, 67890} {
		t.Errorf("parseNetDev = %v", nd)
	}

	ds := parseDiskstats([]byte(diskFixture))
	if len(ds) != 2 || ds["sda"] != [2]uint64{2048, 4096} || ds["nvme0n1"] != [2]uint64{8, 16} {
		t.Errorf("parseDiskstats = %v", ds)
	}

	st, ok := parseProcStat([]byte(procStatFixture))
	want := procStat{pid: 4242, ppid: 1, tpgid: 4300, comm: "my (odd) cmd", state: "S", utime: 250, stime: 50, threads: 3, starttime: 123456, rss: 789}
	if !ok || st != want {
		t.Errorf("parseProcStat = %+v, %v; want %+v", st, ok, want)
	}
	if st.cpuSeconds() != 3 || st.residentBytes() != float64(789*os.Getpagesize()) {
		t.Errorf("cpuSeconds %v, residentBytes %v", st.cpuSeconds(), st.residentBytes())
	}
	for _, bad := range []string{"", "4242 (x S 1", "x (sh) S 1 2 3", "1 (sh) S 1 2 3 4 5\n"} {
		if _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("parseProcStat(%q): ok", bad)
		}
	}
}

// TestParseProcStatSelf: this process's own /proc/self/stat parses, with
// its pid and some CPU time.
func TestParseProcStatSelf(t *testing.T) {
	b, err := readProc("/proc", "self", "stat")
	if err != nil {
		t.Skip(err)
	}
	st, ok := parseProcStat(b)
	if !ok || st.pid != os.Getpid() || st.ppid != os.Getppid() || st.threads < 1 || st.rss <= 0 {
		t.Fatalf("parseProcStat(/proc/self/stat) = %+v, %v (pid %d)", st, ok, os.Getpid())
	}
}

// FuzzProcFiles: no input makes a parser panic, and what they return keeps
// their promises.
func FuzzProcFiles(f *testing.F) {
	for _, s := range []string{statFixture, netDevFixture, diskFixture, procStatFixture, "MemTotal: 1 kB\n", "1 2 3 4/5 6", "cpu 1 2 3 4\ncpu99999999999 1 2 3 4"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, cpus, _ := parseStat(b); len(cpus) > len(b) {
			t.Fatalf("%d CPUs out of %d bytes", len(cpus), len(b))
		}
		parseMeminfo(b)
		if l, ok := parseLoadavg(b); ok && (l[0] < 0 || l[1] < 0 || l[2] < 0) {
			t.Fatalf("negative load %v", l)
		}
		parseNetDev(b)
		parseDiskstats(b)
		if st, ok := parseProcStat(b); ok && !strings.Contains(string(b), strconv.Itoa(st.pid)) {
			t.Fatalf("pid %d not in %q", st.pid, b)
		}
	})
}

// TestNetDevTotals: every interface's bytes are summed; lines that do not
// parse are skipped.
func TestNetDevTotals(t *testing.T) {
	const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 123456789 100    0    0    0     0          0         0 987654     90    0    0    0     0       0          0
 bad0: x 1 2 3 4 5 6 7 8
short: 1 2 3
`
	for _, tc := range []struct {
		in     string
		rx, tx uint64
		ok     bool
	}{
		{netDev, 123457789, 988654, true},
		{"Inter-| Receive\n face |bytes\n", 0, 0, false},
		{"", 0, 0, false},
		{"lo: 1 0 0 0 0 0 0 0 2", 1, 2, true},
	} {
		rx, tx, ok := NetDevTotals([]byte(tc.in))
		if rx != tc.rx || tx != tc.tx || ok != tc.ok {
			t.Errorf("NetDevTotals(%q) = %d, %d, %v; want %d, %d, %v", tc.in, rx, tx, ok, tc.rx, tc.tx, tc.ok)
		}
	}
}

func FuzzNetDevTotals(f *testing.F) {
	for _, s := range []string{"lo: 1 0 0 0 0 0 0 0 2\n", "a: 1 2 3 4 5 6 7 8 9\nb: 9 8 7 6 5 4 3 2 1\n", "", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rx, tx, ok := NetDevTotals([]byte(s))
		if !ok && (rx != 0 || tx != 0) {
			t.Fatalf("NetDevTotals(%q) = %d, %d, false", s, rx, tx)
		}
	})
}
