package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestAnswerOf(t *testing.T) {
	cases := []struct {
		name, line string
		want       answer
		ok         bool
	}{
		{"a yes", `{"msg":"yes","webhook":"checks","namespace":"demo-system","process":"auth-api","revision":"sha256:ab","reason":"every check passed"}`,
			answer{"checks", "auth-api", "sha256:ab", "yes", "every check passed", time.Time{}}, true},
		{"a hold", `{"msg":"not yet","webhook":"may-start","namespace":"demo-system","process":"auth-ui","revision":"sha256:cd","reason":"waiting for job x"}`,
			answer{"may-start", "auth-ui", "sha256:cd", "not yet", "waiting for job x", time.Time{}}, true},
		{"an error carries its cause", `{"time":"2026-12-02T03:04:05Z","msg":"cannot answer","webhook":"may-start","namespace":"demo-system","process":"auth-ui","cause":"inputs: not found"}`,
			answer{"may-start", "auth-ui", "", "cannot answer", "inputs: not found", time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)}, true},
		{"another namespace", `{"msg":"yes","webhook":"checks","namespace":"other","process":"auth-api"}`, answer{}, false},
		{"a round's line", `{"msg":"release held","namespace":"demo-system","reason":"stale-proof"}`, answer{}, false},
		{"a request line", `{"msg":"request","webhook":"checks","namespace":"demo-system"}`, answer{}, false},
		{"not JSON", `panic: something`, answer{}, false},
		{"empty", ``, answer{}, false},
	}
	for _, c := range cases {
		got, ok := answerOf(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: answerOf = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	for outcome, status := range map[string]int{"yes": 200, "not yet": 409, "cannot answer": 503} {
		if got := (answer{outcome: outcome}).status(); got != status {
			t.Errorf("status of %q = %d, want %d", outcome, got, status)
		}
	}
}

// TestHeardCountsRepeats: the same answer again is counted, not printed
// again, and the count is said before the next different answer and at the
// chapter's end; every answer is kept for the expectations.
func TestHeardCountsRepeats(t *testing.T) {
	var out bytes.Buffer
	tl := &teller{out: &out}
	tl.seen.last, tl.seen.repeats = map[string]answer{}, map[string]int{}
	hold := answer{"may-start", "auth-api", "sha256:ab", "not yet", "waiting for job x", time.Time{}}
	yes := answer{"may-start", "auth-api", "sha256:ab", "yes", "every step", time.Time{}}
	for i, a := range []answer{hold, hold, hold, yes, yes} {
		a.at = time.Unix(int64(i), 0) // asked again, at another time
		tl.heard(a)
	}
	tl.flush()
	got := out.String()
	for _, want := range []string{"→ 409 waiting for job x", "asked 2 more time(s)", "→ 200 every step", "asked 1 more time(s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the transcript has no %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 4 {
		t.Errorf("%d lines for two answers and their repeats, want 4:\n%s", n, got)
	}
	if len(tl.seen.answers) != 5 {
		t.Errorf("kept %d answers, want all 5", len(tl.seen.answers))
	}
}
