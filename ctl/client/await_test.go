package client

import (
	"context"
	"errors"
	"testing"
)

// TestResponseBeforeEnd: a response the reader delivered before the
// connection ended is what a call returns, not the end. A host refusing a
// request answers it and then closes (wrong token: -32001, then close
// 1008); a caller that looks only after both arrived must still see -32001.
func TestResponseBeforeEnd(t *testing.T) {
	c := &Conn{done: make(chan struct{}), err: errors.New("closed: 1008 unauthorized")}
	close(c.done)
	for i := range 100 { // a select between the two ready cases picks at random
		ch := make(chan response, 1)
		ch <- response{Error: &Error{Code: -32001, Message: "unauthorized"}}
		err := c.await(context.Background(), ch, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != -32001 {
			t.Fatalf("call %d returned %v, want the -32001 response that arrived before the close", i, err)
		}
	}
	// With no response, the end is reported.
	if err := c.await(context.Background(), make(chan response, 1), nil); err == nil || err.Error() != "closed: 1008 unauthorized" {
		t.Fatalf("a call on an ended connection returned %v, want why it ended", err)
	}
}
