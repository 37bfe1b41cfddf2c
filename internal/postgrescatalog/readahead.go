package postgrescatalog

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// DefaultReadAhead is how many databases are read side by side before the
// apply, each on its own connection.
const DefaultReadAhead = 8

// vaultReaders is how many Vault reads are in flight at once. Over HTTP/1.1
// Vault's client keeps GOMAXPROCS+1 idle connections to a server, at least
// 2: more readers than that would open a new connection for most reads. Two
// keep the reads ahead of the databases, which take far longer.
const vaultReaders = 2

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
// and a few databases' reads at a time. Reads change nothing, so reading
// out of order is safe; every change still happens in catalog order. Each
// Project's names are its own, so applying one never alters what was read
// about another.
//
// Its three kinds of read overlap: Vault's answers wait on Vault, not on
// PostgreSQL, so they are read beside the databases rather than by the
// same workers; and each database is signed in to as soon as its own
// server-wide read has arrived, while the rest of the batch still runs.
func (a *Applier) readAhead(ctx context.Context, main *pgx.Conn) []lookahead {
	projects := a.Catalog.Projects
	ahead := make([]lookahead, len(projects))

	var vault sync.WaitGroup
	vault.Go(func() {
		sideBySide(vaultReaders, 2*len(projects), func(j int) {
			p, r := projects[j/2], &ahead[j/2].roles[j%2]
			path := p.VaultRoles.Owner
			if j%2 == 1 {
				path = p.VaultRoles.Data
			}
			r.role, r.found, r.err = a.Vault.ReadDatabaseRole(ctx, path)
		})
	})

	batch := &pgx.Batch{}
	for _, p := range projects {
		batch.Queue(sharedQuery, p.Database, p.OwnerRole, p.DataRole)
	}
	results := main.SendBatch(ctx, batch)
	workers := a.ReadAhead
	if workers <= 0 {
		workers = DefaultReadAhead
	}
	arrived := make(chan int, len(projects))
	var databases sync.WaitGroup
	for range min(workers, len(projects)) {
		databases.Go(func() {
			for i := range arrived {
				a.readDatabase(ctx, projects[i], &ahead[i])
			}
		})
	}
	for i := range projects {
		ahead[i].sharedErr = results.QueryRow().Scan(&ahead[i].shared)
		arrived <- i
	}
	close(arrived)
	_ = results.Close() // a failed read is read again in order, and reported there
	databases.Wait()
	vault.Wait()
	return ahead
}

// readDatabase signs in to a Project's database and reads its grants when
// the server-wide read found nothing to change; otherwise the apply reads
// it again anyway.
func (a *Applier) readDatabase(ctx context.Context, p Project, ahead *lookahead) {
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

// sideBySide calls read for 0 to n-1 on at most workers goroutines and
// returns when every call has.
func sideBySide(workers, n int, read func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				read(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
