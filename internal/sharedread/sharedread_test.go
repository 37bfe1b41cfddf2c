package sharedread_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/sharedread"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// TestOneReadAnswersForMaxAge walks the clock over a cache: fresh answers
// are the last read, a failed read answers as long, a clock that went back
// reads again.
func TestOneReadAnswersForMaxAge(t *testing.T) {
	// The test asks from one goroutine, so the clock needs no lock.
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	var reads atomic.Int32
	var fail atomic.Bool
	cache := sharedread.New(func(_ context.Context, now time.Time) (time.Time, error) {
		reads.Add(1)
		if fail.Load() {
			return time.Time{}, errors.New("down")
		}
		return now, nil
	}, 5*time.Second, time.Second, now)
	get := func() (time.Time, error) { return cache.Get(context.Background()) }

	first, err := get()
	if err != nil || !first.Equal(at) || reads.Load() != 1 {
		t.Fatalf("first read %v, %v after %d reads", first, err, reads.Load())
	}
	for _, step := range []struct {
		name     string
		advance  time.Duration
		fail     bool
		reads    int32
		wantErr  bool
		wantRead bool // the answer is the read made at this step
	}{
		{"still fresh", 4 * time.Second, false, 1, false, false},
		{"stale: read again", time.Second, false, 2, false, true},
		{"the read fails", 5 * time.Second, true, 3, true, true},
		{"the failure answers while fresh", time.Second, false, 3, true, false},
		{"stale again: read and succeed", 4 * time.Second, false, 4, false, true},
		{"the clock went back: read", -time.Minute, false, 5, false, true},
	} {
		at = at.Add(step.advance)
		fail.Store(step.fail)
		got, err := get()
		if (err != nil) != step.wantErr || reads.Load() != step.reads {
			t.Fatalf("%s: %v after %d reads, want error %v after %d", step.name, err, reads.Load(), step.wantErr, step.reads)
		}
		if step.wantRead && !step.wantErr && !got.Equal(at) {
			t.Fatalf("%s: answered the read of %v, not one now", step.name, got)
		}
	}
}

// TestManyCallersAtOnceCostOneRead: twenty callers asking while the first
// read runs wait for it, and it is the only read.
func TestManyCallersAtOnceCostOneRead(t *testing.T) {
	var reads, inFlight, most atomic.Int32
	release := make(chan struct{})
	cache := sharedread.New(func(context.Context, time.Time) (int, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		reads.Add(1)
		<-release
		return 7, nil
	}, time.Minute, time.Minute, nil)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if got, err := cache.Get(context.Background()); err != nil || got != 7 {
				t.Errorf("answered %d, %v", got, err)
			}
		})
	}
	wait.Poll{Within: 10 * time.Second, Every: time.Millisecond}.For(t, "a read started", func() bool { return reads.Load() > 0 })
	close(release)
	wg.Wait()
	if reads.Load() != 1 || most.Load() != 1 {
		t.Fatalf("%d reads, %d at once; want one", reads.Load(), most.Load())
	}
}

// TestACallerThatGivesUpStopsWaiting: a read in flight holds the cache; a
// caller behind it that gives up is answered its own context's error, and
// the read still answers the caller that started it.
func TestACallerThatGivesUpStopsWaiting(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	cache := sharedread.New(func(ctx context.Context, _ time.Time) (string, error) {
		close(started)
		select {
		case <-release:
			return "read", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, time.Minute, time.Minute, nil)
	first := make(chan error, 1)
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	go func() { _, err := cache.Get(firstCtx); first <- err }()
	<-started
	// The caller that started the read gives up: the read goes on.
	cancelFirst()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cache.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller that gave up got %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the read cut short by its caller giving up: %v", err)
	}
	if got, err := cache.Get(context.Background()); err != nil || got != "read" {
		t.Fatalf("after the read: %q, %v", got, err)
	}
}

// TestTheReadIsCutOff: a read that hangs ends at the timeout with an error.
func TestTheReadIsCutOff(t *testing.T) {
	cache := sharedread.New(func(ctx context.Context, _ time.Time) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}, time.Minute, 50*time.Millisecond, nil)
	if _, err := cache.Get(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hung read answered %v", err)
	}
}
