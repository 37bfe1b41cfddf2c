// Package wait holds a test to a condition with a deadline: it looks again
// and again until the condition holds, so a test waits only as long as the
// thing it waits for, never a fixed sleep, and fails naming what never came.
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Poll is how long a test waits for a condition and how often it looks.
// The zero Poll waits 30 s, looking every 20 ms.
type Poll struct {
	// Within is the deadline; 30 s when zero.
	Within time.Duration
	// Every is the pause between two looks; 20 ms when zero. A condition
	// that asks a server several things wants a longer one.
	Every time.Duration
	// Detail, when set, follows the failure: the logs of what was waited
	// on, read only once the deadline has passed.
	Detail fmt.Stringer
}

// For waits up to 30 s for ok, failing t with what.
func For(t testing.TB, what string, ok func() bool) {
	t.Helper()
	Poll{}.For(t, what, ok)
}

// For waits for ok, failing t with what once the deadline has passed.
func (p Poll) For(t testing.TB, what string, ok func() bool) {
	t.Helper()
	p.Until(t, what, func() (bool, string) { return ok(), "" })
}

// Until waits for cond, failing t with what and the state cond last
// described once the deadline has passed.
func (p Poll) Until(t testing.TB, what string, cond func() (ok bool, last string)) {
	t.Helper()
	within, every := p.Within, p.Every
	if within == 0 {
		within = 30 * time.Second
	}
	if every == 0 {
		every = 20 * time.Millisecond
	}
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("%s: not within %s", what, within)
			if last != "" {
				msg += "; last: " + last
			}
			if p.Detail != nil {
				msg += "\n" + p.Detail.String()
			}
			t.Fatal(msg)
			return
		}
		time.Sleep(every)
	}
}
