package pty_test

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv(steadyWriterEnv)); err == nil {
		steadyWriter(n)
		return
	}
	goleak.VerifyTestMain(m)
}

// steadyWriterEnv makes the test binary a program that, after a line of
// input, writes n pieces of 4 KiB of 'a' with 300 µs between them (see
// TestSteadyOutputWakesLazily) and exits.
const steadyWriterEnv = "AHP_PTY_TEST_STEADY_WRITER"

func steadyWriter(n int) {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		os.Exit(1)
	}
	piece := bytes.Repeat([]byte{'a'}, 4<<10)
	for range n {
		if _, err := os.Stdout.Write(piece); err != nil {
			os.Exit(1)
		}
		time.Sleep(300 * time.Microsecond)
	}
	os.Exit(0)
}
