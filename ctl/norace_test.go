//go:build !race

package ctl_test

const raceEnabled = false
