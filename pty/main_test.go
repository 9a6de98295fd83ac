package pty_test

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahp-dev/ahpd/pty"
)

func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv(pty.SteadyWriterEnv)); err == nil {
		steadyWriter(n)
		return
	}
	goleak.VerifyTestMain(m)
}

// steadyWriter is the program pty.SteadyWriterEnv asks for.
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
