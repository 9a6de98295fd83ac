package ctl

// Reading asciicast v2 (docs/recording.md), for `ahpctl recordings cat`:
// the header line, then one JSON array per line, [seconds, "o"|"i"|"r"|"m",
// "text"]. Only what cat needs is kept: the output events and their times.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// maxCastLine bounds one line of a .cast file. ahpd writes event lines of
// at most 64 KiB; other writers' lines may be longer, but a line this long
// is not a recording.
const maxCastLine = 8 << 20

// castHeader is the first line of an asciicast v2 file.
type castHeader struct {
	Version   int     `json:"version"`
	Width     int     `json:"width"`
	Height    int     `json:"height"`
	Timestamp float64 `json:"timestamp"`
	Title     string  `json:"title"`
}

// castEvent is one event line.
type castEvent struct {
	Time float64 // seconds since the start
	Type string  // o, i, r, m or another code
	Data string
}

// castReader reads an asciicast v2 stream line by line.
type castReader struct {
	r    *bufio.Reader
	line int
}

func newCastReader(r io.Reader) *castReader {
	return &castReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// readLine returns the next line without its "\n"; io.EOF at the end.
func (c *castReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxCastLine {
			return nil, fmt.Errorf("line %d: longer than %d bytes", c.line+1, maxCastLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(line) > 0 {
			err = nil // a last line without "\n" (a recording being written ends with one)
		}
		if err != nil {
			return nil, err
		}
		c.line++
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
}

// header reads and checks the header line.
func (c *castReader) header() (castHeader, error) {
	line, err := c.readLine()
	if err == io.EOF {
		return castHeader{}, errors.New("empty file: not an asciicast recording")
	}
	if err != nil {
		return castHeader{}, err
	}
	var h castHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return castHeader{}, fmt.Errorf("line 1: not an asciicast v2 header: %v", err)
	}
	if h.Version != 2 {
		return castHeader{}, fmt.Errorf("line 1: asciicast version %d; only version 2 is read", h.Version)
	}
	return h, nil
}

// next returns the next event; io.EOF at the end. Blank lines are
// skipped, as asciinema does.
func (c *castReader) next() (castEvent, error) {
	for {
		line, err := c.readLine()
		if err != nil {
			return castEvent{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var raw []json.RawMessage
		if err := json.Unmarshal(line, &raw); err != nil || len(raw) != 3 {
			return castEvent{}, fmt.Errorf("line %d: want [time, code, data], got %.80q", c.line, line)
		}
		var ev castEvent
		if err := json.Unmarshal(raw[0], &ev.Time); err != nil || ev.Time < 0 || math.IsInf(ev.Time, 0) {
			return castEvent{}, fmt.Errorf("line %d: time: want seconds, got %.40s", c.line, raw[0])
		}
		if err := json.Unmarshal(raw[1], &ev.Type); err != nil {
			return castEvent{}, fmt.Errorf("line %d: code: want a string, got %.40s", c.line, raw[1])
		}
		if err := json.Unmarshal(raw[2], &ev.Data); err != nil {
			return castEvent{}, fmt.Errorf("line %d: data: want a string: %v", c.line, err)
		}
		return ev, nil
	}
}
