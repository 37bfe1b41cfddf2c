package releasehistory_test

import (
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 s"},
		{400 * time.Millisecond, "0 s"},
		{12 * time.Second, "12 s"},
		{90 * time.Second, "1 min 30 s"},
		{30 * time.Minute, "30 min"},
		{time.Hour, "1 h"},
		{time.Hour + 30*time.Second, "1 h"}, // the next unit is none: seconds are not the second unit
		{71*time.Hour + 52*time.Minute, "2 d 23 h"},
		{76*time.Hour + 10*time.Minute, "3 d 4 h"},
		{3 * day, "3 d"},
		{3*day + 5*time.Minute, "3 d"},
		{-90 * time.Second, "−1 min 30 s"},
	} {
		if got := rh.HumanDuration(tc.d); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestRelative(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Time{}, ""},
		{ago(20 * time.Second), "just now"},
		{ago(5 * time.Minute), "5 min ago"},
		{ago(51*time.Hour + 10*time.Minute), "2 d 3 h ago"},
		{now.Add(4 * time.Minute), "in 4 min"},
	} {
		if got := rh.Relative(tc.at, now); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.at, got, tc.want)
		}
	}
}
