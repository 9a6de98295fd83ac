package systemd

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestNotifierAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@ahpd-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Setenv("NOTIFY_SOCKET", name)
	n, err := NotifierFromEnv()
	if err != nil || n == nil {
		t.Fatalf("NotifierFromEnv = %v, %v", n, err)
	}
	if _, ok := os.LookupEnv("NOTIFY_SOCKET"); ok {
		t.Error("NOTIFY_SOCKET still set: shells would inherit it")
	}
	if err := n.Notify("READY=1\nSTATUS=x"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	k, err := c.Read(buf)
	if err != nil || string(buf[:k]) != "READY=1\nSTATUS=x" {
		t.Fatalf("received %q, %v", buf[:k], err)
	}
	var none *Notifier
	if err := none.Notify("READY=1"); err != nil {
		t.Fatalf("nil Notifier: %v", err)
	}
}

func TestNotifierFromEnv(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if n, err := NotifierFromEnv(); n != nil || err != nil {
		t.Errorf("unset: %v, %v", n, err)
	}
	t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
	if _, err := NotifierFromEnv(); err == nil {
		t.Error("vsock: no error")
	}
}

func TestWatchdogFromEnv(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		usec, pid string
		want      time.Duration
		err       bool
	}{
		{"", "", 0, false},
		{"30000000", "", 30 * time.Second, false},
		{"500000", me, 500 * time.Millisecond, false},
		{"500000", "1", 0, false}, // another process's
		{"soon", "", 0, true},
		{"0", "", 0, true},
	} {
		t.Setenv("WATCHDOG_USEC", c.usec)
		t.Setenv("WATCHDOG_PID", c.pid)
		got, err := WatchdogFromEnv()
		if got != c.want || (err != nil) != c.err {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v, %v; want %v, error %v", c.usec, c.pid, got, err, c.want, c.err)
		}
		for _, k := range []string{"WATCHDOG_USEC", "WATCHDOG_PID"} {
			if _, ok := os.LookupEnv(k); ok {
				t.Errorf("%s still set", k)
			}
		}
	}
}

func TestListenersFromEnvIgnoresOtherPID(t *testing.T) {
	t.Setenv("LISTEN_PID", "1")
	t.Setenv("LISTEN_FDS", "2")
	t.Setenv("LISTEN_FDNAMES", "http:control")
	a, err := ListenersFromEnv()
	if err != nil || a.HTTP != nil || a.Control != nil {
		t.Fatalf("LISTEN_PID of another process: %+v, %v", a, err)
	}
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if _, ok := os.LookupEnv(k); ok {
			t.Errorf("%s still set", k)
		}
	}
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("LISTEN_FDS", "many")
	if _, err := ListenersFromEnv(); err == nil {
		t.Error("LISTEN_FDS=many: no error")
	}
}

func TestJournalHandler(t *testing.T) {
	var buf bytes.Buffer
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelDebug)
	log := slog.New(NewJournalHandler(&buf, lv))
	log.Debug("d", "k", 1)
	log.Info("listening", "addr", "127.0.0.1:7681")
	log.With("conn", "c1").WithGroup("g").Warn("two\nlines", "x", "a b")
	log.Error("")
	lv.Set(slog.LevelWarn)
	log.Info("hidden")
	want := "<7>d k=1\n" +
		"<6>listening addr=127.0.0.1:7681\n" +
		"<4>\"two\\nlines\" conn=c1 g.x=\"a b\"\n" +
		"<3>\"\"\n"
	if buf.String() != want {
		t.Fatalf("journal lines:\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestJournalStderr(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	if !JournalStderr(f) {
		t.Error("matching JOURNAL_STREAM: not detected")
	}
	if JournalStderr(&bytes.Buffer{}) {
		t.Error("a non-file counted as the journal")
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1))
	if JournalStderr(f) {
		t.Error("another inode counted as the journal (a shell that inherited JOURNAL_STREAM)")
	}
}
