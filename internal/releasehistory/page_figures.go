package releasehistory

import (
	"strconv"
	"strings"
	"time"
)

// HumanDuration writes a span as people do, its two largest units, the
// rest dropped: 3 d 4 h, 1 h, 30 min, 1 min 30 s, 12 s.
func HumanDuration(d time.Duration) string {
	if d < 0 {
		return "−" + HumanDuration(-d)
	}
	if d < time.Second {
		return "0 s"
	}
	units := []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}}
	var parts []string
	for _, u := range units {
		n := d / u.size
		d -= n * u.size
		if n > 0 {
			parts = append(parts, strconv.FormatInt(int64(n), 10)+" "+u.name)
		}
		// The unit after the largest is the last written, zero or not.
		if len(parts) == 2 || len(parts) == 1 && n == 0 {
			break
		}
	}
	return strings.Join(parts, " ")
}

// Relative writes when t was from now: 5 min ago, 2 d 3 h ago, in 4 min.
func Relative(t, now time.Time) string {
	switch d := now.Sub(t); {
	case t.IsZero():
		return ""
	case d > -time.Minute && d < time.Minute:
		return "just now"
	case d < 0:
		return "in " + HumanDuration(-d)
	default:
		return HumanDuration(d) + " ago"
	}
}
