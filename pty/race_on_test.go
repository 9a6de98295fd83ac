//go:build race

package pty_test

const raceEnabled = true
