package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// TestALoopPassesOnWakeAndAsItsWaitSays: with an hour's wait only a wake
// makes a second pass; then a wait of nothing makes the next at once.
func TestALoopPassesOnWakeAndAsItsWaitSays(t *testing.T) {
	wake := make(chan struct{})
	passes := make(chan int, 16)
	waits := []time.Duration{time.Hour, 0, time.Hour}
	count := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- bus.Loop{Wake: wake, Wait: func() time.Duration {
			w := waits[min(count-1, len(waits)-1)]
			return w
		}}.Run(ctx, func(context.Context) {
			count++
			passes <- count
		})
	}()
	next := func(what string) int {
		t.Helper()
		select {
		case n := <-passes:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("no pass %s within 10 s", what)
			return 0
		}
	}
	if n := next("at once"); n != 1 {
		t.Fatalf("pass %d first", n)
	}
	select {
	case n := <-passes:
		t.Fatalf("pass %d with an hour to wait and no wake", n)
	case <-time.After(200 * time.Millisecond):
	}
	wake <- struct{}{}
	if n := next("on the wake"); n != 2 {
		t.Fatalf("pass %d on the wake", n)
	}
	if n := next("after a wait of nothing"); n != 3 {
		t.Fatalf("pass %d", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the loop ended with %v", err)
	}
}

func TestUnansweredIsTheBusNotAnswering(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nats.ErrTimeout, true},
		{fmt.Errorf("the backup seat of n1: %w", nats.ErrNoResponders), true},
		{nats.ErrConnectionReconnecting, true},
		{nats.ErrConnectionClosed, true},
		{context.DeadlineExceeded, true},
		{jetstream.ErrNoStreamResponse, true},
		{jetstream.ErrKeyNotFound, false},
		{errors.New("the backup seat of n1: disk full"), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := bus.Unanswered(c.err); got != c.want {
			t.Errorf("Unanswered(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
