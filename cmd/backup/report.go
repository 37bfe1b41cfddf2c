package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

// reporter is how restore and drill tell how they went: the Progress the
// restore calls while it runs, then the outcome. One writes the JSON lines a
// log collector reads; the other speaks to a person at a terminal.
type reporter interface {
	backup.Progress
	notStarted(command string, err error)
	listFailed(err error)
	restoreFailed(g backup.Generation, err error)
	restored(from string, r backup.Restored)
	passedOver(ahead []backup.Generation)
	drillFailed(err error)
	drillPassed(from string, r backup.Restored)
}

// newReporter speaks to a person when stderr is a terminal and asJSON is
// false, and writes JSON lines otherwise.
func newReporter(asJSON bool, stderr io.Writer, logger *slog.Logger) reporter {
	if !asJSON && isTerminal(stderr) {
		return &terminalReport{w: stderr}
	}
	return logReport{logger: logger}
}

// isTerminal reports whether w is a terminal; a test makes it say yes.
var isTerminal = cli.IsTerminal

// logReport writes one JSON line for each outcome and nothing while the
// restore runs.
type logReport struct{ logger *slog.Logger }

func (logReport) Begin(string, int64) {}
func (logReport) Advance(int64)       {}
func (logReport) End()                {}

func (l logReport) notStarted(command string, err error) {
	l.logger.Error("backup "+command+" did not start", "error", err.Error())
}

func (l logReport) listFailed(err error) { l.logger.Error("restore failed", "error", err.Error()) }

func (l logReport) restoreFailed(g backup.Generation, err error) {
	l.logger.Error("restore failed", "generation", g.Name(), "error", err.Error())
}

func (l logReport) restored(_ string, r backup.Restored) {
	l.logger.Info("restored", "generation", r.Generation.Name(), "path", r.Path, "files", r.Files)
}

func (l logReport) passedOver(ahead []backup.Generation) {
	l.logger.Warn("the drill passed over copies stamped after its own time; a clock ran ahead when they were written",
		"copies", generationNames(ahead))
}

func (l logReport) drillFailed(err error) { l.logger.Error("drill failed", "error", err.Error()) }

func (l logReport) drillPassed(_ string, r backup.Restored) {
	l.logger.Info("drill passed", "generation", r.Generation.Name(), "files", r.Files, "sqlite_databases", r.Databases)
}

// terminalReport writes plain lines, and a progress bar while a stage
// moves bytes: bytes done, the rate and the time left.
type terminalReport struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (t *terminalReport) Begin(stage string, size int64) {
	fmt.Fprintln(t.w, stage)
	if size <= 0 {
		return
	}
	t.bar = progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(t.w),
		progressbar.OptionShowBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(t.w) }),
	)
}

func (t *terminalReport) Advance(n int64) {
	if t.bar != nil {
		_ = t.bar.Add64(n)
	}
}

// End leaves a finished bar as it is and ends the line of one cut short.
func (t *terminalReport) End() {
	if t.bar != nil && !t.bar.IsFinished() {
		_ = t.bar.Exit()
	}
	t.bar = nil
}

func (t *terminalReport) notStarted(command string, err error) {
	fmt.Fprintf(t.w, "backup %s did not start: %v\n", command, err)
}

func (t *terminalReport) listFailed(err error) {
	fmt.Fprintf(t.w, "listing the generations failed: %v\n", err)
}

func (t *terminalReport) restoreFailed(g backup.Generation, err error) {
	fmt.Fprintf(t.w, "restore of %s failed: %v\n", g.Name(), err)
}

func (t *terminalReport) restored(from string, r backup.Restored) {
	fmt.Fprintf(t.w, "restored %s from %s\n", r.Generation.Name(), from)
	t.summary(r, "into", into(r))
}

func (t *terminalReport) passedOver(ahead []backup.Generation) {
	fmt.Fprintf(t.w, "passed over copies stamped after the drill's own time (a clock ran ahead when they were written): %s\n",
		strings.Join(generationNames(ahead), ", "))
}

func (t *terminalReport) drillFailed(err error) { fmt.Fprintf(t.w, "drill failed: %v\n", err) }

func (t *terminalReport) drillPassed(from string, r backup.Restored) {
	fmt.Fprintf(t.w, "drill passed: %s from %s\n", r.Generation.Name(), from)
	t.summary(r, "restored", restoredWhat(r)+" into a scratch folder, since removed")
}

func (t *terminalReport) summary(r backup.Restored, label, what string) {
	fmt.Fprintf(t.w, "  %-9s %s\n", label, what)
	fmt.Fprintf(t.w, "  %-9s %s as stored\n", "size", size(r.Size))
	fmt.Fprintf(t.w, "  %-9s %s\n", "passed", strings.Join(r.Checks, ", "))
}

// into says what a restore wrote where.
func into(r backup.Restored) string {
	_, where := described(r)
	return where
}

func restoredWhat(r backup.Restored) string {
	what, _ := described(r)
	return what
}

// described is what a restore wrote and where, as its generation's method
// puts it.
func described(r backup.Restored) (what, where string) {
	if m, ok := backup.MethodNamed(r.Generation.Method); ok {
		return m.Describe(r)
	}
	return "the generation", r.Path
}

// size is n bytes for a person: "1.5 MiB (1572864 bytes)".
func size(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	value, unit := float64(n), 0
	for value >= 1024 && unit < 5 {
		value /= 1024
		unit++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", value, "BKMGTP"[unit], n)
}
