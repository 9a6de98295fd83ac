package pty_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
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
	if v := os.Getenv(pty.StreamWriterEnv); v != "" {
		streamWriter(v)
		return
	}
	if n, err := strconv.Atoi(os.Getenv(pty.FloodWriterEnv)); err == nil {
		floodWriter(n)
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

// streamWriter is the program pty.StreamWriterEnv asks for.
func streamWriter(spec string) {
	var seed, pieces int
	var valid string
	if n, _ := fmt.Sscanf(spec, "%d:%d:%s", &seed, &pieces, &valid); n < 2 {
		os.Exit(2)
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		os.Exit(1)
	}
	for i, w := range streamWrites(seed, pieces, valid == "valid") {
		if _, err := os.Stdout.Write(w); err != nil {
			os.Exit(1)
		}
		if i%16 == 15 {
			time.Sleep(time.Millisecond) // the reader reads the writes apart
		}
	}
	os.Exit(0)
}

// streamWrites returns the writes of streamWriter: a varied terminal
// stream cut at random bytes (inside UTF-8 sequences and escapes too);
// with valid, it holds no invalid UTF-8.
func streamWrites(seed, pieces int, valid bool) [][]byte {
	r := rand.New(rand.NewPCG(uint64(seed), 42))
	words := []string{"plain", "é", "日本語", "🙂", "e\u0301", "a\tb", "x", "👍🏽", "ｗｉｄｅ", "Ω≈ç√∫"}
	var buf []byte
	var out [][]byte
	for i := range pieces {
		switch r.IntN(16) {
		case 0:
			buf = fmt.Appendf(buf, "\x1b[%dm", []int{0, 1, 4, 7, 31, 32, 33, 34, 41, 42, 44, 22, 24, 27}[r.IntN(14)])
		case 1:
			buf = fmt.Appendf(buf, "\x1b[38;5;%dm", r.IntN(256))
		case 2:
			buf = fmt.Appendf(buf, "\x1b[%d;%dH", 1+r.IntN(24), 1+r.IntN(80))
		case 3:
			buf = append(buf, []string{"\x1b[K", "\x1b[1K", "\x1b[J", "\x1b[2K"}[r.IntN(4)]...)
		case 4:
			buf = fmt.Appendf(buf, "\x1b[%d;%dr", 1+r.IntN(5), 10+r.IntN(14))
		case 5:
			buf = append(buf, "\x1b[r"...)
		case 6:
			if r.IntN(4) == 0 {
				buf = append(buf, []string{"\x1b[?1049h", "\x1b[?1049l"}[r.IntN(2)]...)
			}
		case 7:
			buf = fmt.Appendf(buf, "\x1b]2;title %d\x07", i)
		case 8:
			if r.IntN(4) == 0 && !valid {
				buf = append(buf, 0xff)
			}
		default:
			buf = fmt.Appendf(buf, "line %d", i)
			for range r.IntN(8) {
				buf = append(buf, ' ')
				buf = append(buf, words[r.IntN(len(words))]...)
			}
			buf = append(buf, "\r\n"...)
		}
		if len(buf) > 64 && r.IntN(3) == 0 {
			// Cut anywhere, inside a UTF-8 sequence or an escape too.
			k := 1 + r.IntN(len(buf)-1)
			out = append(out, bytes.Clone(buf[:k]), bytes.Clone(buf[k:]))
			buf = buf[:0]
		}
	}
	out = append(out, buf, []byte("\x1b[0m\x1b[r\x1b[?1049l\r\nEND\r\n"))
	return out
}

// floodWriter is the program pty.FloodWriterEnv asks for.
func floodWriter(n int) {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		os.Exit(1)
	}
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	var line []byte
	for i := 0; n > 0; i++ {
		line = fmt.Appendf(line[:0], "%08d flood flood flood flood flood flood flood flood flood\n", i)
		if len(line) > n {
			line = line[:n]
		}
		n -= len(line)
		if _, err := w.Write(line); err != nil {
			os.Exit(1)
		}
	}
	if err := w.Flush(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
