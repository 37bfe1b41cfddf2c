package releasehistory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// fakeCluster is a SweepCluster that answers from memory, failing or
// moving the records it is told to.
type fakeCluster struct {
	entries          []rh.Entry
	listErr          error
	failed, moved    map[string]bool
	alerted, deleted []string
}

func (f *fakeCluster) List(context.Context) ([]rh.Entry, error) { return f.entries, f.listErr }

func (f *fakeCluster) Alert(_ context.Context, s rh.Stall) (string, error) {
	switch {
	case f.failed[s.Name]:
		return "", errors.New("forbidden: " + s.Name)
	case f.moved[s.Name]:
		return "ev-" + s.Name, fmt.Errorf("%w: %s", rh.ErrMoved, s.Name)
	}
	f.alerted = append(f.alerted, s.Name)
	return "ev-" + s.Name, nil
}

func (f *fakeCluster) Delete(_ context.Context, d rh.Deletion) error {
	switch {
	case f.failed[d.Name]:
		return errors.New("forbidden: " + d.Name)
	case f.moved[d.Name]:
		return fmt.Errorf("%w: %s", rh.ErrMoved, d.Name)
	}
	f.deleted = append(f.deleted, d.Name)
	return nil
}

// sweepEntries are two stalled releases, two records past the TTL, and
// one unreadable record.
func sweepEntries(t *testing.T) []rh.Entry {
	return []rh.Entry{
		entry(rec(t, "1", rr.StateMerged, ago(time.Hour), ago(time.Hour))),
		entry(rec(t, "2", rr.StateProgressing, ago(2*time.Hour), ago(time.Hour))),
		entry(rec(t, "3", rr.StateAborted, ago(30*day), ago(20*day))),
		entry(rec(t, "4", rr.StateAborted, ago(30*day), ago(20*day))),
		{Name: "release-bad", Unreadable: "the record does not decode", Created: ago(30 * day)},
	}
}

func name(t *testing.T, v string) string { return rec(t, v, rr.StateMerged, now, now).Name() }

func sweepWith(t *testing.T, c rh.SweepCluster) (swept rh.Swept, out, logs *bytes.Buffer, err error) {
	t.Helper()
	out, logs = &bytes.Buffer{}, &bytes.Buffer{}
	s := &rh.Sweeper{Cluster: c, Out: out, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	swept, err = s.Sweep(context.Background(), policy, now)
	return swept, out, logs, err
}

func TestSweepDoesThePlanAndSaysEachDeed(t *testing.T) {
	c := &fakeCluster{entries: sweepEntries(t)}
	swept, out, logs, err := sweepWith(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if want := (rh.Swept{Records: 5, Unreadable: 1, Raised: 2, Deleted: 2}); swept != want {
		t.Fatalf("swept %+v, want %+v", swept, want)
	}
	got := testenv.JSONLines(t, out.String())
	if len(got) != 4 {
		t.Fatalf("%d lines:\n%s", len(got), out)
	}
	if got[0]["action"] != "stalled" || got[0]["record"] != name(t, "1") || got[0]["state"] != "merged" ||
		got[0]["event"] != "ev-"+name(t, "1") || got[0]["releaseId"] != "docs@1:prod-eu/prod" || got[0]["since"] == nil {
		t.Errorf("the first stall's line: %v", got[0])
	}
	if got[2]["action"] != "deleted" || got[2]["record"] != name(t, "3") || got[2]["releaseId"] != "docs@3:prod-eu/prod" || got[2]["why"] == "" {
		t.Errorf("the first deletion's line: %v", got[2])
	}
	if !strings.Contains(logs.String(), `"msg":"record unreadable","record":"release-bad"`) {
		t.Errorf("the unreadable record is not said:\n%s", logs)
	}
}

// TestSweepGoesOnPastAFailure: a failed call fails the sweep, having done
// the rest; a record that moved is said and skipped, no failure.
func TestSweepGoesOnPastAFailure(t *testing.T) {
	c := &fakeCluster{entries: sweepEntries(t),
		failed: map[string]bool{name(t, "1"): true, name(t, "3"): true},
		moved:  map[string]bool{name(t, "2"): true, name(t, "4"): true}}
	swept, out, logs, err := sweepWith(t, c)
	if err == nil || !strings.Contains(err.Error(), "forbidden: "+name(t, "1")) || !strings.Contains(err.Error(), "forbidden: "+name(t, "3")) ||
		errors.Is(err, rh.ErrMoved) {
		t.Fatalf("error %v", err)
	}
	// The moved stall had its Event raised before the record was found moved.
	if swept.Raised != 1 || swept.Deleted != 0 || swept.Moved != 2 || len(testenv.JSONLines(t, out.String())) != 1 {
		t.Fatalf("swept %+v, output:\n%s", swept, out)
	}
	if n := strings.Count(logs.String(), "left to the next sweep"); n != 2 {
		t.Fatalf("%d moved lines:\n%s", n, logs)
	}
}

// TestSweepDeletesNothingOnAPartialList: the rollback window is known from
// every record alone, so a list that failed part-way raises the stalls it
// read and deletes none.
func TestSweepDeletesNothingOnAPartialList(t *testing.T) {
	c := &fakeCluster{entries: sweepEntries(t), listErr: errors.New("list page 2: the server is down")}
	swept, _, _, err := sweepWith(t, c)
	if err == nil || !strings.Contains(err.Error(), "page 2") {
		t.Fatalf("error %v", err)
	}
	if len(c.deleted) != 0 || !slices.Equal(c.alerted, []string{name(t, "1"), name(t, "2")}) || swept.Raised != 2 {
		t.Fatalf("deleted %v, alerted %v", c.deleted, c.alerted)
	}
}

// TestPlanSweepKeepsWhatWasListed: a stall and a deletion carry the
// version and uid listed, which the writes are held to.
func TestPlanSweepKeepsWhatWasListed(t *testing.T) {
	stalled := entry(rec(t, "1", rr.StateMerged, ago(time.Hour), ago(time.Hour)))
	old := entry(rec(t, "2", rr.StateAborted, ago(30*day), ago(20*day)))
	stalled.Version, stalled.UID, old.Version, old.UID = "11", "uid-1", "12", "uid-2"
	plan := rh.PlanSweep([]rh.Entry{stalled, old}, policy, now)
	if len(plan.Stalls) != 1 || plan.Stalls[0].Version != "11" || plan.Stalls[0].UID != "uid-1" ||
		len(plan.Deletions) != 1 || plan.Deletions[0].Version != "12" || plan.Deletions[0].UID != "uid-2" {
		t.Fatalf("%+v", plan)
	}
}

// TestSweepSpellsOutTenFailures: an API server refusing every call makes
// one error of ten failures and a count, not one of thousands; a cancelled
// run stops between calls.
func TestSweepSpellsOutTenFailures(t *testing.T) {
	var entries []rh.Entry
	failed := map[string]bool{}
	for i := range 25 {
		e := entry(rec(t, fmt.Sprint(i), rr.StateAborted, ago(30*day), ago(20*day)))
		entries, failed[e.Name] = append(entries, e), true
	}
	_, _, _, err := sweepWith(t, &fakeCluster{entries: entries, failed: failed})
	if err == nil || strings.Count(err.Error(), "forbidden") != 10 || !strings.HasSuffix(err.Error(), "and 15 more failures") {
		t.Fatalf("error %v", err)
	}

	c := &fakeCluster{entries: entries}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &rh.Sweeper{Cluster: c, Out: &bytes.Buffer{}, Logger: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil))}
	if _, err := s.Sweep(ctx, policy, now); !errors.Is(err, context.Canceled) || len(c.deleted) != 0 {
		t.Fatalf("a cancelled sweep: %v, deleted %v", err, c.deleted)
	}
}
