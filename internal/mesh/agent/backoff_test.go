package agent_test

import (
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
)

func TestTheBackoffDoublesToItsBound(t *testing.T) {
	for _, c := range []struct {
		name     string
		backoff  agent.Backoff
		failures int
		want     time.Duration
	}{
		{"no failure, no wait", agent.Backoff{First: time.Second, Most: 30 * time.Second}, 0, 0},
		{"the first", agent.Backoff{First: time.Second, Most: 30 * time.Second}, 1, time.Second},
		{"doubled", agent.Backoff{First: time.Second, Most: 30 * time.Second}, 2, 2 * time.Second},
		{"doubled again", agent.Backoff{First: time.Second, Most: 30 * time.Second}, 4, 8 * time.Second},
		{"bounded", agent.Backoff{First: time.Second, Most: 30 * time.Second}, 6, 30 * time.Second},
		{"bounded after many, no overflow", agent.Backoff{First: time.Second, Most: 30 * time.Second}, 1000, 30 * time.Second},
		{"defaults: 1 s", agent.Backoff{}, 1, time.Second},
		{"defaults: 30 s at most", agent.Backoff{}, 50, 30 * time.Second},
		{"a bound under the first is the first", agent.Backoff{First: time.Minute, Most: time.Second}, 3, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.backoff.After(c.failures); got != c.want {
				t.Fatalf("After(%d) = %v, want %v", c.failures, got, c.want)
			}
		})
	}
}
