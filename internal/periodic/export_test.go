package periodic

import "time"

// SetTicks makes the loop tick on c instead of its interval.
func (l *Loop) SetTicks(c <-chan time.Time) { l.ticks = c }
