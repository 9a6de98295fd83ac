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
