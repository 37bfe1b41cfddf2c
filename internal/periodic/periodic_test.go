package periodic_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/periodic"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func freshCode(l *periodic.Loop) int {
	rec := httptest.NewRecorder()
	l.FreshHandler(rec, httptest.NewRequest(http.MethodGet, "/fresh", nil))
	return rec.Code
}

func TestFreshness(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	var fail atomic.Bool
	l := &periodic.Loop{Interval: time.Minute, Now: c.Now, Pass: func(context.Context) error {
		if fail.Load() {
			return errors.New("github answered 502")
		}
		return nil
	}}
	if freshCode(l) != http.StatusServiceUnavailable {
		t.Fatal("a loop that never ran is fresh")
	}
	l.RunOnce(context.Background())
	if freshCode(l) != http.StatusOK {
		t.Fatal("a loop that just succeeded is not fresh")
	}
	fail.Store(true)
	c.Add(2 * time.Minute)
	l.RunOnce(context.Background())
	if freshCode(l) != http.StatusOK {
		t.Fatal("fresh should hold for exactly twice the interval")
	}
	c.Add(time.Second)
	l.RunOnce(context.Background())
	if freshCode(l) != http.StatusServiceUnavailable {
		t.Fatal("a loop failing past twice the interval is still fresh")
	}
	fail.Store(false)
	l.RunOnce(context.Background())
	if freshCode(l) != http.StatusOK || !l.LastSuccess().Equal(c.Now()) {
		t.Fatal("a success does not make the loop fresh again")
	}
}

// Prompts during a pass coalesce into one more pass; passes never overlap.
func TestPromptsCoalesce(t *testing.T) {
	var running, overlapped atomic.Bool
	var passes atomic.Int32
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	l := &periodic.Loop{Interval: time.Hour, Pass: func(context.Context) error {
		if running.Swap(true) {
			overlapped.Store(true)
		}
		defer running.Store(false)
		passes.Add(1)
		entered <- struct{}{}
		<-release
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	<-entered // the pass at start
	for range 5 {
		l.Prompt()
	}
	release <- struct{}{}
	<-entered // exactly one more pass for the five prompts
	release <- struct{}{}
	select {
	case <-entered:
		t.Fatal("five prompts during one pass made more than one more pass")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	close(release)
	<-done
	if overlapped.Load() {
		t.Fatal("two passes ran at once")
	}
	if got := passes.Load(); got != 2 {
		t.Fatalf("passes = %d, want 2", got)
	}
	if !l.Fresh() {
		t.Fatal("a loop that just succeeded is not fresh")
	}
}

// A tick and prompts that all came during one pass make one more pass.
func TestTickAndPromptCoalesce(t *testing.T) {
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	ticks := make(chan time.Time, 1)
	l := &periodic.Loop{Interval: time.Hour, Pass: func(context.Context) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	l.SetTicks(ticks)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	<-entered // the pass at start
	ticks <- time.Now()
	l.Prompt()
	release <- struct{}{}
	<-entered
	release <- struct{}{}
	select {
	case <-entered:
		t.Fatal("a tick and a prompt during one pass made two more passes")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	close(release)
	<-done
}

func TestTicks(t *testing.T) {
	var passes atomic.Int32
	l := &periodic.Loop{Interval: 20 * time.Millisecond, Pass: func(context.Context) error { passes.Add(1); return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	l.Run(ctx)
	if passes.Load() < 3 {
		t.Fatalf("passes = %d in 150ms at a 20ms interval", passes.Load())
	}
}

// TestRunBeside: the loop passes while the server serves, and no pass runs
// once the server has returned; the server's error is the answer.
func TestRunBeside(t *testing.T) {
	var passes atomic.Int32
	l := &periodic.Loop{Interval: time.Millisecond, Pass: func(context.Context) error {
		passes.Add(1)
		return nil
	}}
	stopped := errors.New("server stopped")
	err := l.RunBeside(context.Background(), func(context.Context) error {
		for passes.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		return stopped
	})
	if !errors.Is(err, stopped) {
		t.Fatalf("RunBeside = %v, want the server's error", err)
	}
	after := passes.Load()
	time.Sleep(20 * time.Millisecond)
	if passes.Load() != after {
		t.Fatal("the loop passed after RunBeside returned")
	}
}
