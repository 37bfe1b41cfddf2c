package testenv

// Count is the number of requests counted under exactly key, a
// "METHOD /path" as Requests lists it.
func (c *RequestCounter) Count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}
