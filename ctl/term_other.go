//go:build !linux

package ctl

import (
	"errors"
	"os"
)

var errNoTerminal = errors.New("attach is supported on Linux only")

func isTerminal(*os.File) bool                { return false }
func makeRaw(*os.File) (func(), error)        { return nil, errNoTerminal }
func terminalSize(*os.File) (int, int, error) { return 0, 0, errNoTerminal }
