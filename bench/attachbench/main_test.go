package main

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if err := sleep(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("sleep = %v", err)
	}
	cause := errors.New("interrupt")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	if err := sleep(ctx, time.Hour); !errors.Is(err, cause) {
		t.Fatalf("sleep after the context ended = %v, want its cause", err)
	}
}

func TestWaitGone(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if waitGone(t.Context(), pid, 100*time.Millisecond) {
		t.Fatal("a running process reported gone")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if waitGone(ctx, pid, time.Hour) {
		t.Fatal("a running process reported gone when the context ended")
	}
	_ = cmd.Process.Kill() // a zombie until the deferred Wait: gone
	if !waitGone(t.Context(), pid, 10*time.Second) {
		t.Fatal("a killed process not reported gone")
	}
}
