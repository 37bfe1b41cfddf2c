// Package backupworker is a node's backup worker: it answers the node
// agent's asks for a backup of a module's data directory, on
// mesh.backup.<node>, by running this product's files backup method (SQLite
// databases copied consistently) into the node's backup folder, and says how
// it ended. The agent applies a module that holds data only once the worker
// has answered done. Its command, its credential and its queue group keep the
// published name backup-seat.
package backupworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// Subject is where node's backup worker is asked.
func Subject(node string) (string, error) {
	token, err := bus.EncodeName(node)
	if err != nil {
		return "", err
	}
	return "mesh.backup." + token, nil
}

// Ask is one ask of the worker.
type Ask struct {
	Module string `json:"module"`
	// DataDir is the absolute folder to back up.
	DataDir string `json:"dataDir"`
}

// Answer is how the backup ended: the generation written, or why none was.
type Answer struct {
	Generation string `json:"generation,omitempty"`
	Path       string `json:"path,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Retain is how many generations of each module the worker keeps.
const Retain = 3

// Worker answers its node's asks.
type Worker struct {
	Node string
	// Dir is the node's backup folder: a claim per module below it.
	Dir    string
	Conn   *nats.Conn
	Now    func() time.Time
	Logger *slog.Logger
}

// Run answers asks, one at a time, until ctx ends.
func (s *Worker) Run(ctx context.Context) error {
	subject, err := Subject(s.Node)
	if err != nil {
		return err
	}
	asks := make(chan *nats.Msg, 16)
	// The queue group keeps its published name, so workers of two versions
	// share the asks during an upgrade.
	sub, err := s.Conn.ChanQueueSubscribe(subject, "seat", asks)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-asks:
			answer := s.backUp(ctx, m.Data)
			raw, _ := json.Marshal(answer)
			if err := m.Respond(raw); err != nil {
				s.Logger.Warn("answer not sent", slog.String("error", err.Error()))
			}
		}
	}
}

// DecodeAsk reads an ask off the bus: a module the bus can key, and a
// clean absolute data directory, or why not.
func DecodeAsk(raw []byte) (Ask, error) {
	var ask Ask
	if err := json.Unmarshal(raw, &ask); err != nil {
		return Ask{}, fmt.Errorf("the ask is not JSON: %w", err)
	}
	if _, err := bus.EncodeName(ask.Module); err != nil {
		return Ask{}, err
	}
	if !filepath.IsAbs(ask.DataDir) || filepath.Clean(ask.DataDir) != ask.DataDir {
		return Ask{}, fmt.Errorf("the data directory %q is not a clean absolute path", ask.DataDir)
	}
	return ask, nil
}

func (s *Worker) backUp(ctx context.Context, raw []byte) Answer {
	ask, err := DecodeAsk(raw)
	if err != nil {
		return Answer{Error: err.Error()}
	}
	folder, _ := bus.EncodeName(ask.Module)
	if _, err := os.Stat(ask.DataDir); errors.Is(err, os.ErrNotExist) {
		// Nothing written yet: nothing to lose, so nothing to keep.
		return Answer{}
	}
	claim := filepath.Join(s.Dir, folder)
	if err := os.MkdirAll(claim, 0o700); err != nil {
		return Answer{Error: err.Error()}
	}
	job := backup.Job{Dir: claim, Retain: Retain, Now: s.Now, Logger: s.Logger,
		Method: backup.Files{Source: ask.DataDir, Staging: filepath.Join(claim, backup.StagingDir), Logger: s.Logger}}
	result, err := job.Run(ctx)
	if err != nil {
		s.Logger.Error("backup failed", slog.String("module", ask.Module), slog.String("error", err.Error()))
		return Answer{Error: err.Error()}
	}
	s.Logger.Info("backed up", slog.String("module", ask.Module), slog.String("generation", result.Generation.Name()), slog.Int64("bytes", result.Size))
	return Answer{Generation: result.Generation.Name(), Path: result.Path}
}

// Client asks node's backup worker from the agent.
type Client struct {
	Node string
	Conn *nats.Conn
	// Within bounds how long a backup may take; 0 is 10 minutes.
	Within time.Duration
}

// BackUp asks for a backup of dataDir and waits for its end; no answer,
// or an answer with an error, is no backup.
func (c Client) BackUp(ctx context.Context, module, dataDir string) error {
	subject, err := Subject(c.Node)
	if err != nil {
		return err
	}
	within := c.Within
	if within == 0 {
		within = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	raw, _ := json.Marshal(Ask{Module: module, DataDir: dataDir})
	m, err := c.Conn.RequestWithContext(ctx, subject, raw)
	if err != nil {
		return fmt.Errorf("the backup seat of %s: %w", c.Node, err)
	}
	var a Answer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return fmt.Errorf("the backup seat of %s answered no JSON: %w", c.Node, err)
	}
	if a.Error != "" {
		return fmt.Errorf("the backup seat of %s: %s", c.Node, a.Error)
	}
	return nil
}
