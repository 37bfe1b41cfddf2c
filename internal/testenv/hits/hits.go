// Package hits counts the requests a test's stand-in server was asked, by
// path, for tests that assert who was asked what and how often.
package hits

import (
	"fmt"
	"sync"
)

// Counter counts requests by path; its zero value is ready, and it is safe
// for a server's handlers and the test to use at once.
type Counter struct {
	mu     sync.Mutex
	byPath map[string]int
}

// Add counts one request to path.
func (c *Counter) Add(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byPath == nil {
		c.byPath = map[string]int{}
	}
	c.byPath[path]++
}

// Count is how many requests path took.
func (c *Counter) Count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byPath[path]
}

// Total is how many requests every path took together.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.byPath {
		n += v
	}
	return n
}

// String is the counts by path, for a failure's message.
func (c *Counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.byPath)
}
