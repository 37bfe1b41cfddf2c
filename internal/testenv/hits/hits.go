// Package hits counts requests by a key, a path or "METHOD /path", for
// tests that assert who was asked what and how often: a stand-in server's
// handlers count what they took, a client's transport what it sent.
package hits

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Counter counts requests by key; its zero value is ready, and it is safe
// for a server's handlers and the test to use at once.
type Counter struct {
	mu    sync.Mutex
	byKey map[string]int
}

// Add counts one request under key.
func (c *Counter) Add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]int{}
	}
	c.byKey[key]++
}

// Count is how many requests were counted under key.
func (c *Counter) Count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[key]
}

// Total is how many requests every key took together.
func (c *Counter) Total() int {
	return c.Sum(func(string) bool { return true })
}

// Sum is how many requests were counted under the keys match accepts.
func (c *Counter) Sum(match func(key string) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.byKey {
		if match(k) {
			n += v
		}
	}
	return n
}

// Keys are the keys counted, sorted.
func (c *Counter) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.byKey))
}

// Reset forgets what was counted.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKey = nil
}

// String is the counts by key, for a failure's message.
func (c *Counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.byKey)
}
