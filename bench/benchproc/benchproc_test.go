package benchproc

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestCPUCountsWork(t *testing.T) {
	before, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	after, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 50*time.Millisecond { // 300 ms of spinning, counted in 10 ms ticks
		t.Errorf("CPU rose by %v over 300 ms of spinning (%d)", after-before, x)
	}
	if _, err := CPU(1 << 30); err == nil {
		t.Error("CPU of a process that does not exist: no error")
	}
}

// TestCPUSplitUser: spinning counts as user time, and CPU is the sum of
// the split.
func TestCPUSplitUser(t *testing.T) {
	user0, sys0, err := CPUSplit(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	user1, sys1, err := CPUSplit(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if user1-user0 < 50*time.Millisecond || user1-user0 < sys1-sys0 {
		t.Errorf("300 ms of spinning: user time +%v, system time +%v (%d)", user1-user0, sys1-sys0, x)
	}
	if _, _, err := CPUSplit(1 << 30); err == nil {
		t.Error("CPUSplit of a process that does not exist: no error")
	}
}

func TestWaitOrKill(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	start := time.Now()
	WaitOrKill(cmd, 100*time.Millisecond)
	if cmd.ProcessState == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("not reaped: %v", cmd.ProcessState)
	}
}

// TestAlive: a running child is alive; killed, it is not, both as a
// zombie (not yet waited for) and once reaped.
func TestAlive(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Fatal("a running child is not alive")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatal("a killed child (a zombie until waited for) is still alive after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Wait()
	if Alive(pid) {
		t.Error("a reaped child is alive")
	}
}
