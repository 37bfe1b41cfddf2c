package postgrescatalog

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// DefaultReadAhead is how many Projects are read side by side before the
// apply, each on its own connection.
const DefaultReadAhead = 8

// lookahead is what was read about one Project before anything is applied:
// enough to tell that nothing differs. It decides nothing on its own: a
// Project it does not prove current is read again, in order, by the apply.
type lookahead struct {
	shared    Shared
	sharedErr error
	// current says PostgreSQL holds the Project as the catalog says.
	current bool
	roles   [2]vaultRead
}

type vaultRead struct {
	role  DatabaseRole
	found bool
	err   error
}

// readAhead reads every Project before the first change, so that a run
// over an applied catalog costs one round trip for the server-wide reads
// and a few Projects' reads at a time. Reads change nothing, so reading
// out of order is safe; every change still happens in catalog order. Each
// Project's names are its own, so applying one never alters what was read
// about another.
func (a *Applier) readAhead(ctx context.Context, main *pgx.Conn) []lookahead {
	projects := a.Catalog.Projects
	ahead := make([]lookahead, len(projects))
	batch := &pgx.Batch{}
	for _, p := range projects {
		batch.Queue(sharedQuery, p.Database, p.OwnerRole, p.DataRole)
	}
	results := main.SendBatch(ctx, batch)
	for i := range projects {
		ahead[i].sharedErr = results.QueryRow().Scan(&ahead[i].shared)
	}
	_ = results.Close() // a failed read is read again in order, and reported there

	workers := a.ReadAhead
	if workers <= 0 {
		workers = DefaultReadAhead
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(projects)) {
		wg.Go(func() {
			for i := range next {
				a.readOne(ctx, projects[i], &ahead[i])
			}
		})
	}
	for i := range projects {
		next <- i
	}
	close(next)
	wg.Wait()
	return ahead
}

func (a *Applier) readOne(ctx context.Context, p Project, ahead *lookahead) {
	for k, path := range []string{p.VaultRoles.Owner, p.VaultRoles.Data} {
		r := &ahead.roles[k]
		r.role, r.found, r.err = a.Vault.ReadDatabaseRole(ctx, path)
	}
	if ahead.sharedErr != nil {
		return
	}
	roles, create, rest, err := PlanShared(p, ahead.shared)
	if err != nil || len(roles) > 0 || create != nil || len(rest) > 0 {
		return
	}
	conn, err := a.Connect(ctx, p.Database)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	in, err := readInside(ctx, conn, p)
	ahead.current = err == nil && len(PlanGrants(p, in)) == 0
}
