package testenv

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// LogBuffer collects what a running service or server writes from its own
// goroutines while a test reads it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JSONLines reads a log written one JSON object a line, as every binary's
// is, failing t at a line that is not one.
func JSONLines(t testing.TB, log string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range strings.Lines(log) {
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		lines = append(lines, fields)
	}
	return lines
}
