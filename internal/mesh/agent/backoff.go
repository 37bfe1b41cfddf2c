package agent

import "time"

// Backoff is how long the agent waits to try the bus again after it did not
// answer: First after one such pass, doubled after each pass more, never
// over Most. The client library already spreads its reconnects, and a
// reconnect wakes the agent at once, so no jitter is added here.
type Backoff struct {
	First, Most time.Duration
}

// After is the wait after failures unanswered passes in a row; none, 0.
func (b Backoff) After(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	first, most := b.First, b.Most
	if first <= 0 {
		first = time.Second
	}
	if most < first {
		most = max(first, 30*time.Second)
	}
	wait := first
	for range failures - 1 {
		if wait >= most/2 {
			return most
		}
		wait *= 2
	}
	return min(wait, most)
}
