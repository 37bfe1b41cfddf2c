package backup

import (
	"fmt"
	"io"
)

// Progress hears how a restore or a drill goes, stage by stage, so that a
// person watching sees it move. The restore calls it and knows nothing of
// who listens: the command line draws a bar on a terminal, and says nothing
// before the outcome in a JSON log.
type Progress interface {
	// Begin starts a stage ("fetching, decrypting and unpacking …") that
	// moves size bytes; size is 0 for a stage that moves none (a check).
	Begin(stage string, size int64)
	// Advance counts n more bytes of the stage under way.
	Advance(n int64)
	// End closes the stage under way, whether it went through or not.
	End()
}

type silent struct{}

func (silent) Begin(string, int64) {}
func (silent) Advance(int64)       {}
func (silent) End()                {}

func (r Restorer) progress() Progress {
	if r.Progress == nil {
		return silent{}
	}
	return r.Progress
}

// progressReader counts the bytes read through it to a Progress.
type progressReader struct {
	r io.Reader
	p Progress
}

func (c progressReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.p.Advance(int64(n))
	}
	return n, err
}

// count is "1 SQLite database", "2 SQLite databases".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
