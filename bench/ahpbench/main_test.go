package main

import "testing"

func TestCheckFanout(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, true}, {2, true}, {8, true}, {1, false}, {-1, false}} {
		if err := checkFanout(tc.n); (err == nil) != tc.ok {
			t.Errorf("checkFanout(%d) = %v, want ok %v", tc.n, err, tc.ok)
		}
	}
}
