package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
)

// Inventory lists the facts the cluster holds now.
type Inventory interface {
	Facts(ctx context.Context) (Facts, error)
}

// SnapshotFile is cluster-state.yml in the Estate repository: read with its
// blob sha, written only over the blob read. *githubapp.File is one.
type SnapshotFile interface {
	Read(ctx context.Context) (githubapp.Content, error)
	Write(ctx context.Context, data []byte, baseSHA, message string) (githubapp.Content, error)
}

// Collector captures the cluster's facts and commits them when they changed.
type Collector struct {
	Cluster   string
	Inventory Inventory
	File      SnapshotFile
	Now       func() time.Time
	Logger    *slog.Logger
}

// Outcome says what one capture did.
type Outcome struct {
	// Committed is true when the capture wrote a new snapshot.
	Committed bool
	// Message is the commit message written, if any.
	Message string
	Facts   Facts
}

// Capture lists the facts, compares them with the committed snapshot and
// writes a new one when they differ, over exactly the blob it read. A
// snapshot of another cluster, or one the schema refuses, is never
// overwritten.
func (c *Collector) Capture(ctx context.Context) (Outcome, error) {
	current, err := c.File.Read(ctx)
	var committed *Snapshot
	switch {
	case errors.Is(err, githubapp.ErrNotFound):
		current = githubapp.Content{}
	case err != nil:
		return Outcome{}, fmt.Errorf("read the committed snapshot: %w", err)
	default:
		s, err := Decode(current.Data)
		if err != nil {
			return Outcome{}, fmt.Errorf("the committed snapshot (blob %s) is not overwritten: %w", current.SHA, err)
		}
		committed = &s
	}
	facts, err := c.Inventory.Facts(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("list the cluster's facts: %w", err)
	}
	next, message, write, err := Next(committed, c.Cluster, facts, c.Now())
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Facts: next.Facts()}
	if !write {
		c.logger().Info("capture unchanged", slog.String("cluster", c.Cluster),
			slog.Int("bindings", len(out.Facts.Bindings)), slog.Int("placements", len(out.Facts.Placements)))
		return out, nil
	}
	data, err := Encode(next)
	if err != nil {
		return Outcome{}, err
	}
	written, err := c.File.Write(ctx, data, current.SHA, message)
	if err != nil {
		return Outcome{}, fmt.Errorf("commit the snapshot: %w", err)
	}
	c.logger().Info("capture committed", slog.String("cluster", c.Cluster), slog.String("blob", written.SHA),
		slog.String("change", strings.SplitN(message, "\n", 2)[0]))
	out.Committed, out.Message = true, message
	return out, nil
}

func (c *Collector) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}

// Pass is Capture shaped for periodic.Loop.
func (c *Collector) Pass(ctx context.Context) error {
	_, err := c.Capture(ctx)
	return err
}

// ErrOtherCluster says the committed snapshot names another cluster.
var ErrOtherCluster = errors.New("the committed snapshot names another cluster")

// Next decides what a capture writes: nothing when the facts equal the
// committed snapshot's (its capturedAt stays); otherwise a snapshot captured
// at now and the commit message naming the cluster and what changed. A
// committed snapshot of another cluster is an error: it is never overwritten.
func Next(committed *Snapshot, cluster string, facts Facts, now time.Time) (Snapshot, string, bool, error) {
	facts = Normalize(facts)
	if committed != nil && committed.Cluster != cluster {
		return Snapshot{}, "", false, fmt.Errorf("%w: it is %q's and this Collector captures %q", ErrOtherCluster, committed.Cluster, cluster)
	}
	if committed != nil && committed.Facts().Equal(facts) {
		return *committed, "", false, nil
	}
	next := NewSnapshot(cluster, facts, now)
	return next, CommitMessage(committed, next), true, nil
}

// maxListedChanges bounds the changes a commit message body lists one by one.
const maxListedChanges = 50

// CommitMessage names the cluster and what changed: a subject that counts the
// changes and a body that lists them.
func CommitMessage(before *Snapshot, after Snapshot) string {
	if before == nil {
		return fmt.Sprintf("cluster-state: %s: first capture, %s and %s", after.Cluster,
			count(len(after.Bindings), "binding"), count(len(after.Placements), "placement"))
	}
	b, a := before.Facts(), after.Facts()
	addedB, removedB := diff(b.Bindings, a.Bindings)
	addedP, removedP := diff(b.Placements, a.Placements)
	var parts, lines []string
	if n := len(addedB) + len(removedB); n > 0 {
		parts = append(parts, fmt.Sprintf("bindings +%d -%d", len(addedB), len(removedB)))
	}
	if n := len(addedP) + len(removedP); n > 0 {
		parts = append(parts, fmt.Sprintf("placements +%d -%d", len(addedP), len(removedP)))
	}
	for _, x := range addedB {
		lines = append(lines, fmt.Sprintf("+ claim %s bound on %s", x.Claim, x.Node))
	}
	for _, x := range removedB {
		lines = append(lines, fmt.Sprintf("- claim %s bound on %s", x.Claim, x.Node))
	}
	for _, x := range addedP {
		lines = append(lines, fmt.Sprintf("+ process %s on %s", x.Process, x.Node))
	}
	for _, x := range removedP {
		lines = append(lines, fmt.Sprintf("- process %s on %s", x.Process, x.Node))
	}
	if len(lines) > maxListedChanges {
		lines = append(lines[:maxListedChanges], fmt.Sprintf("... and %d more", len(lines)-maxListedChanges))
	}
	return fmt.Sprintf("cluster-state: %s: %s\n\n%s\n", after.Cluster, strings.Join(parts, ", "), strings.Join(lines, "\n"))
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// diff lists what is in after and not before, and in before and not after.
func diff[T comparable](before, after []T) (added, removed []T) {
	in := func(xs []T) map[T]bool {
		m := make(map[T]bool, len(xs))
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	b, a := in(before), in(after)
	for _, x := range after {
		if !b[x] {
			added = append(added, x)
		}
	}
	for _, x := range before {
		if !a[x] {
			removed = append(removed, x)
		}
	}
	return added, removed
}
