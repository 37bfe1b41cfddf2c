package postgrescatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// lockKey is the advisory lock every run of this job takes before its first
// change, so that the Job and its hourly CronJob never apply side by side.
// Reads need no lock: a run that changes nothing never takes it.
const lockKey int64 = 0x7067_6361_7461_6c67 // "pgcatalg"

// StepError is a failure of one Project's apply: which database, which
// step, and why. Projects before it stay applied.
type StepError struct {
	Project  string
	Database string
	Step     Step
	Err      error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("database %s, step %s: %v", e.Database, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Summary counts what a run did.
type Summary struct {
	Projects int
	// Changed counts Projects that needed any statement or Vault write.
	Changed int
	// Statements counts the changes issued to PostgreSQL: DDL and grants.
	Statements int
	// VaultWrites counts database roles written.
	VaultWrites int
}

// Applier applies a catalog: PostgreSQL through Connect, Vault through
// Vault.
type Applier struct {
	Catalog *Catalog
	Connect func(ctx context.Context, database string) (*pgx.Conn, error)
	Vault   Vault
	Log     *slog.Logger
	// ReadAhead is how many Projects are read side by side before the
	// apply; DefaultReadAhead when zero.
	ReadAhead int

	locked bool
}

// Apply applies every Project in order and stops at the first failure, a
// *StepError naming the database and the step.
func (a *Applier) Apply(ctx context.Context) (Summary, error) {
	var sum Summary
	main, err := a.Connect(ctx, a.Catalog.Server.MaintenanceDatabase)
	if err != nil {
		return sum, fmt.Errorf("connect to %s: %w", a.Catalog.Server.MaintenanceDatabase, err)
	}
	defer func() { _ = main.Close(context.WithoutCancel(ctx)) }()
	a.locked = false
	ahead := a.readAhead(ctx, main)
	for i, p := range a.Catalog.Projects {
		statements := 0
		if !ahead[i].current {
			statements, err = a.applyDatabase(ctx, main, p)
			sum.Statements += statements
			if err != nil {
				return sum, a.stepError(p, err)
			}
		}
		writes, err := a.applyVaultRoles(ctx, p, ahead[i].roles)
		sum.VaultWrites += writes
		if err != nil {
			return sum, &StepError{Project: p.Project, Database: p.Database, Step: StepVault, Err: err}
		}
		sum.Projects++
		if statements > 0 || writes > 0 {
			sum.Changed++
			a.Log.Info("applied", slog.String("project", p.Project), slog.String("database", p.Database),
				slog.Int("statements", statements), slog.Int("vaultWrites", writes))
		}
	}
	return sum, nil
}

// stepFailure carries the step a PostgreSQL failure happened in.
type stepFailure struct {
	step Step
	err  error
}

func (f *stepFailure) Error() string { return f.err.Error() }
func (f *stepFailure) Unwrap() error { return f.err }

func at(step Step, err error) error {
	if err == nil {
		return nil
	}
	return &stepFailure{step: step, err: err}
}

func (a *Applier) stepError(p Project, err error) error {
	step := StepRead
	if f, ok := errors.AsType[*stepFailure](err); ok {
		step, err = f.step, f.err
	}
	if r, ok := errors.AsType[*Refusal](err); ok {
		step = r.Step
	}
	return &StepError{Project: p.Project, Database: p.Database, Step: step, Err: err}
}

// applyDatabase runs steps 1 to 5 for one Project and returns how many
// changes it issued. It reads first; when nothing differs it returns having
// issued only reads.
func (a *Applier) applyDatabase(ctx context.Context, main *pgx.Conn, p Project) (int, error) {
	shared, err := readShared(ctx, main, p)
	if err != nil {
		return 0, at(StepRead, err)
	}
	roles, create, rest, err := PlanShared(p, shared)
	if err != nil {
		return 0, err
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	if len(roles) == 0 && create == nil && len(rest) == 0 {
		if conn, err = a.Connect(ctx, p.Database); err != nil {
			return 0, at(StepConnect, err)
		}
		in, err := readInside(ctx, conn, p)
		if err != nil {
			return 0, at(StepRead, err)
		}
		if len(PlanGrants(p, in)) == 0 {
			return 0, nil
		}
	}

	if err := a.lock(ctx, main); err != nil {
		return 0, at(StepLock, err)
	}
	issued := 0
	// Read again under the lock: another run may have applied meanwhile.
	if shared, err = readShared(ctx, main, p); err != nil {
		return 0, at(StepRead, err)
	}
	if roles, create, _, err = PlanShared(p, shared); err != nil {
		return 0, err
	}
	if create != nil {
		// CREATE DATABASE cannot run in a transaction: the roles it needs
		// are committed first, then it runs alone.
		n, err := inTransaction(ctx, main, func(tx pgx.Tx) (int, error) { return exec(ctx, tx, roles) })
		issued += n
		if err != nil {
			return issued, err
		}
		if _, err := main.Exec(ctx, create.SQL); err != nil {
			return issued, at(create.Step, err)
		}
		issued++
	}
	if conn == nil {
		if conn, err = a.Connect(ctx, p.Database); err != nil {
			return issued, at(StepConnect, err)
		}
	}
	n, err := inTransaction(ctx, conn, func(tx pgx.Tx) (int, error) {
		shared, err := readShared(ctx, tx, p)
		if err != nil {
			return 0, at(StepRead, err)
		}
		roles, create, rest, err := PlanShared(p, shared)
		if err != nil {
			return 0, err
		}
		if create != nil {
			return 0, at(StepDatabase, errors.New("the database vanished while it was being applied"))
		}
		done, err := exec(ctx, tx, append(roles, rest...))
		if err != nil {
			return done, err
		}
		in, err := readInside(ctx, tx, p)
		if err != nil {
			return done, at(StepRead, err)
		}
		n, err := exec(ctx, tx, PlanGrants(p, in))
		return done + n, err
	})
	return issued + n, err
}

func (a *Applier) lock(ctx context.Context, main *pgx.Conn) error {
	if a.locked {
		return nil
	}
	if _, err := main.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return fmt.Errorf("take the catalog's advisory lock: %w", err)
	}
	a.locked = true
	return nil
}

// inTransaction runs body in one transaction and commits it when body
// succeeds; a failed commit counts as no statement issued.
func inTransaction(ctx context.Context, conn *pgx.Conn, body func(pgx.Tx) (int, error)) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, at(StepBegin, err)
	}
	n, err := body(tx)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, at(StepCommit, err)
	}
	return n, nil
}

func exec(ctx context.Context, tx pgx.Tx, statements []Statement) (int, error) {
	for i, s := range statements {
		if _, err := tx.Exec(ctx, s.SQL); err != nil {
			return i, at(s.Step, err)
		}
	}
	return len(statements), nil
}

// applyVaultRoles is step 6: the owner's and the data role's Vault database
// roles, written only where Vault holds anything else.
// A read made ahead is trusted only where it succeeded.
func (a *Applier) applyVaultRoles(ctx context.Context, p Project, ahead [2]vaultRead) (int, error) {
	writes := 0
	for k, r := range []struct{ path, role string }{{p.VaultRoles.Owner, p.OwnerRole}, {p.VaultRoles.Data, p.DataRole}} {
		want := RoleFor(a.Catalog.Vault.Connection, r.role)
		have, found, err := ahead[k].role, ahead[k].found, ahead[k].err
		if err != nil {
			have, found, err = a.Vault.ReadDatabaseRole(ctx, r.path)
		}
		if err != nil {
			return writes, fmt.Errorf("read %s: %w", r.path, err)
		}
		if found && have.Equal(want) {
			continue
		}
		if err := a.Vault.WriteDatabaseRole(ctx, r.path, want); err != nil {
			return writes, fmt.Errorf("write %s: %w", r.path, err)
		}
		writes++
	}
	return writes, nil
}
