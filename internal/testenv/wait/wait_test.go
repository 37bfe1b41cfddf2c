package wait_test

import (
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// failure records the failure a wait gives instead of ending the test.
type failure struct {
	testing.TB
	said string
}

func (f *failure) Helper()           {}
func (f *failure) Fatal(args ...any) { f.said = args[0].(string) }

type logs string

func (l logs) String() string { return string(l) }

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	looks := 0
	wait.For(t, "the third look", func() bool { looks++; return looks == 3 })
	if looks != 3 {
		t.Fatalf("looked %d times", looks)
	}
}

func TestUntilFailsAfterTheDeadlineNamingWhatItWaitedFor(t *testing.T) {
	f := &failure{TB: t}
	start := time.Now()
	wait.Poll{Within: 50 * time.Millisecond, Every: 5 * time.Millisecond, Detail: logs("the server's log")}.Until(f, "the record", func() (bool, string) {
		return false, "two of three"
	})
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %s, before the deadline", took)
	}
	for _, part := range []string{"the record", "50ms", "last: two of three", "the server's log"} {
		if !strings.Contains(f.said, part) {
			t.Errorf("the failure %q does not say %q", f.said, part)
		}
	}
}
