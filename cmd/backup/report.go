package main

import (
	"log/slog"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
)

// reporter is how restore and drill tell how they went: the Progress the
// restore calls while it runs, then the outcome.
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

// newReporter writes JSON lines.
func newReporter(logger *slog.Logger) reporter { return logReport{logger: logger} }

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
