package cdeventstest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	cdevents "github.com/cdevents/sdk-go/pkg/api"
	cdeventsv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// Received is one event the receiver took: the CloudEvent and the CDEvent
// it carries.
type Received struct {
	CloudEvent cloudevents.Event
	CDEvent    cdevents.CDEventV04
}

// Receiver is a running CloudEvents HTTP receiver.
type Receiver struct {
	// URL is where it receives.
	URL string

	mu       sync.Mutex
	received []Received
	invalid  []string
	refuse   int
}

// Start starts a receiver for the test; it stops when the test ends. Every
// event is decoded and validated with the CDEvents SDK (v0.5); one that does
// not validate is answered 400 and fails the test.
func Start(t testing.TB) *Receiver {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloudevents.NewClientHTTP(cehttp.WithListener(ln))
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{URL: "http://" + ln.Addr().String() + "/"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.StartReceiver(ctx, r.take); err != nil && ctx.Err() == nil {
			t.Errorf("the CloudEvents receiver stopped: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, why := range r.invalid {
			t.Errorf("the receiver took an invalid event: %s", why)
		}
	})
	return r
}

func (r *Receiver) take(ev cloudevents.Event) protocol.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse > 0 {
		r.refuse--
		return cehttp.NewResult(http.StatusServiceUnavailable, "refused by the test")
	}
	cd, err := cdeventsv05.NewFromJsonBytes(ev.Data())
	if err == nil {
		err = cdevents.Validate(cd)
	}
	if err == nil && (cd.GetId() != ev.ID() || releaserecord.TypeOf(cd).String() != ev.Type() || cd.GetSource() != ev.Source()) {
		err = fmt.Errorf("the CloudEvent %s %s %s does not carry its CDEvent's id, type and source", ev.ID(), ev.Type(), ev.Source())
	}
	if err != nil {
		r.invalid = append(r.invalid, fmt.Sprintf("%s %s: %v", ev.Type(), ev.ID(), err))
		return cehttp.NewResult(http.StatusBadRequest, "%v", err)
	}
	r.received = append(r.received, Received{CloudEvent: ev, CDEvent: cd})
	return cehttp.NewResult(http.StatusAccepted, "")
}

// Refuse makes the next n deliveries fail with 503.
func (r *Receiver) Refuse(n int) {
	r.mu.Lock()
	r.refuse = n
	r.mu.Unlock()
}

// Events is every event taken so far, in the order taken.
func (r *Receiver) Events() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.received...)
}

// Types is the CDEvent type of every event taken so far.
func (r *Receiver) Types() []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, releaserecord.TypeOf(e.CDEvent).String())
	}
	return out
}

// WaitFor waits until n events were taken, or fails the test at the
// deadline.
func (r *Receiver) WaitFor(t testing.TB, n int, within time.Duration) []Received {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if got := r.Events(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver took %d events, not %d, within %s: %v", len(r.Events()), n, within, r.Types())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
