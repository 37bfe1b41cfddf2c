package postgrescatalog

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A fresh catalog creates both roles without login, each database owned by
// its owner role, and both Vault roles; the second run sends only reads to
// PostgreSQL and writes nothing to Vault.
func TestApplyFreshCatalogThenNothing(t *testing.T) {
	f := newFixture(t)
	if sum, statements, writes := f.mustApply(t, f.catalog()); sum != (Summary{}) || len(changes(statements)) != 0 || writes != 0 {
		t.Fatalf("an empty catalog: %+v, %s, %d", sum, fmtList(statements), writes)
	}
	c := f.catalog("auth", "knowledge")
	sum, statements, writes := f.mustApply(t, c)
	if sum.Projects != 2 || sum.Changed != 2 || writes != 4 || sum.VaultWrites != 4 {
		t.Fatalf("first run: %+v, %d Vault writes", sum, writes)
	}
	if got := len(changes(statements)); got != sum.Statements {
		t.Errorf("the job counts %d statements, the tracer saw %d changes: %s", sum.Statements, got, fmtList(changes(statements)))
	}
	for _, p := range []string{"auth", "knowledge"} {
		got := f.psqlOne(t, "postgres", `SELECT r.rolname || ' ' || r.rolcanlogin FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = '`+p+`_db'`)
		if got != p+"-owner false" {
			t.Errorf("%s_db is owned by %q, want %s-owner without login", p, got, p)
		}
		if got := f.psqlOne(t, "postgres", `SELECT rolcanlogin FROM pg_roles WHERE rolname = '`+p+`-data'`); got != "f" {
			t.Errorf("%s-data: login %q", p, got)
		}
		role, found, err := f.writes.ReadDatabaseRole(context.Background(), "database/roles/"+p+"-data")
		if err != nil || !found || !role.Equal(RoleFor(connection, p+"-data")) {
			t.Errorf("Vault role %s-data reads %+v, %v, %v", p, role, found, err)
		}
	}

	sum, statements, writes = f.mustApply(t, c)
	if sum.Changed != 0 || sum.Statements != 0 || writes != 0 {
		t.Errorf("second run: %+v, %d Vault writes", sum, writes)
	}
	if ch := changes(statements); len(ch) != 0 {
		t.Errorf("second run sent %s", fmtList(ch))
	}
	// One server-wide read and one read inside each database.
	if len(statements) != 4 {
		t.Errorf("second run sent %d reads, want 4", len(statements))
	}
}

// Logins issued by database/creds/<project>-data read and write the owner's
// tables, including tables the owner creates after the run, and cannot
// change the schema; logins from <project>-owner act as the owner role.
func TestIssuedLoginsActAsTheirRole(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("auth")
	f.mustApply(t, c)
	ctx := context.Background()

	ownerUser, ownerPassword := f.creds(t, "auth-owner")
	owner := f.connectAs(t, "auth_db", ownerUser, ownerPassword)
	if _, err := owner.Exec(ctx, `CREATE SCHEMA accounts; CREATE TABLE accounts.users (id serial PRIMARY KEY, name text);
		CREATE TABLE notes (id bigserial PRIMARY KEY, body text); CREATE VIEW note_bodies AS SELECT body FROM notes`); err != nil {
		t.Fatalf("the owner's login changes the schema: %v", err)
	}
	var tableOwner string
	if err := owner.QueryRow(ctx, `SELECT tableowner FROM pg_tables WHERE tablename = 'users'`).Scan(&tableOwner); err != nil || tableOwner != "auth-owner" {
		t.Fatalf("a table the owner's login created belongs to %q (%v), want auth-owner", tableOwner, err)
	}

	dataUser, dataPassword := f.creds(t, "auth-data")
	data := f.connectAs(t, "auth_db", dataUser, dataPassword)
	var current string
	if err := data.QueryRow(ctx, `SELECT current_user`).Scan(&current); err != nil || current != "auth-data" {
		t.Fatalf("the data login acts as %q (%v), want auth-data", current, err)
	}
	for _, sql := range []string{
		`INSERT INTO accounts.users (name) VALUES ('ada')`,
		`UPDATE accounts.users SET name = 'ada l' WHERE name = 'ada'`,
		`INSERT INTO notes (body) VALUES ('one'), ('two')`,
		`DELETE FROM notes WHERE body = 'one'`,
	} {
		if _, err := data.Exec(ctx, sql); err != nil {
			t.Errorf("data login: %s: %v", sql, err)
		}
	}
	var n int
	if err := data.QueryRow(ctx, `SELECT count(*) FROM notes JOIN note_bodies USING (body)`).Scan(&n); err != nil || n != 1 {
		t.Errorf("data login reads %d notes, %v", n, err)
	}
	for _, sql := range []string{`CREATE TABLE public.mine (x int)`, `DROP TABLE notes`, `TRUNCATE notes`} {
		if _, err := data.Exec(ctx, sql); err == nil {
			t.Errorf("data login may %s", sql)
		}
	}
	// The tables the owner created since need nothing from the next run.
	if sum, statements, writes := f.mustApply(t, c); sum.Statements != 0 || writes != 0 || len(changes(statements)) != 0 {
		t.Errorf("run after the owner's tables: %+v, %s", sum, fmtList(changes(statements)))
	}

	// Grants taken away by hand are given back, and only they.
	f.pg.Psql(t, "auth_db", `REVOKE DELETE ON notes FROM "auth-data"; REVOKE USAGE ON SCHEMA accounts FROM "auth-data";
		REVOKE UPDATE ON SEQUENCE notes_id_seq FROM "auth-data";
		ALTER DEFAULT PRIVILEGES FOR ROLE "auth-owner" REVOKE UPDATE ON SEQUENCES FROM "auth-data";`)
	f.pg.Psql(t, "postgres", `REVOKE CONNECT ON DATABASE auth_db FROM "auth-data"`)
	_, statements, writes := f.mustApply(t, c)
	want := []string{
		`GRANT CONNECT ON DATABASE "auth_db" TO "auth-data"`,
		`GRANT USAGE ON SCHEMA "accounts" TO "auth-data"`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "public" TO "auth-data"`,
		`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA "public" TO "auth-data"`,
		`ALTER DEFAULT PRIVILEGES FOR ROLE "auth-owner" GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO "auth-data"`,
	}
	if got := changes(statements); !slices.Equal(got, want) || writes != 0 {
		t.Errorf("repair sent %s, %d Vault writes", fmtList(got), writes)
	}
	// A Vault role edited by hand is written back.
	if _, err := f.vault.Client.Logical().Write("database/roles/auth-data", map[string]any{"creation_statements": []string{`CREATE ROLE "{{name}}" LOGIN SUPERUSER PASSWORD '{{password}}'`}}); err != nil {
		t.Fatal(err)
	}
	if _, _, writes := f.mustApply(t, c); writes != 1 {
		t.Errorf("an edited Vault role: %d writes", writes)
	}
	if _, statements, writes := f.mustApply(t, c); len(changes(statements)) != 0 || writes != 0 {
		t.Errorf("after the repair: %s, %d writes", fmtList(changes(statements)), writes)
	}
}

// Adopting a database another role owns hands its objects to the owner role
// and makes the old role a member of it: the old login keeps working, what
// it creates later is handed over by the next run.
func TestAdoptionKeepsTheOldLogin(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", `CREATE ROLE legacy LOGIN PASSWORD 'legacy-pw'; CREATE DATABASE knowledge_db OWNER legacy;`)
	// A schema the superuser keeps, as public was before PostgreSQL 15.
	f.pg.Psql(t, "knowledge_db", `CREATE SCHEMA shared; GRANT USAGE, CREATE ON SCHEMA shared TO legacy;`)
	// Another role's table in that schema, which the data role must not gain.
	f.pg.Psql(t, "knowledge_db", `CREATE ROLE auditor; CREATE TABLE shared.audit (entry text); ALTER TABLE shared.audit OWNER TO auditor;`)
	ctx := context.Background()
	legacy := f.connectAs(t, "knowledge_db", "legacy", "legacy-pw")
	// legacy's own default privileges are its too, but REASSIGN OWNED leaves
	// them with it: they must not make every run hand over again.
	if _, err := legacy.Exec(ctx, `CREATE SCHEMA docs; CREATE TABLE docs.pages (id serial PRIMARY KEY, title text); INSERT INTO docs.pages (title) VALUES ('home');
		CREATE TABLE shared.items (id int); ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC`); err != nil {
		t.Fatal(err)
	}
	_ = legacy.Close(ctx)

	c := f.catalog("knowledge")
	sum, statements, _ := f.mustApply(t, c)
	ch := changes(statements)
	for _, want := range []string{
		`ALTER DATABASE "knowledge_db" OWNER TO "knowledge-owner"`,
		`GRANT "knowledge-owner" TO "legacy"`,
		`REASSIGN OWNED BY "legacy" TO "knowledge-owner"`,
	} {
		if !slices.Contains(ch, want) {
			t.Errorf("adoption did not send %s: %s", want, fmtList(ch))
		}
	}
	if sum.Statements != len(ch) {
		t.Errorf("job counts %d, tracer %d", sum.Statements, len(ch))
	}
	if got := f.psqlOne(t, "knowledge_db", `SELECT tableowner FROM pg_tables WHERE tablename = 'pages'`); got != "knowledge-owner" {
		t.Errorf("docs.pages belongs to %q", got)
	}

	legacy = f.connectAs(t, "knowledge_db", "legacy", "legacy-pw")
	if _, err := legacy.Exec(ctx, `INSERT INTO docs.pages (title) VALUES ('about'); CREATE TABLE docs.later (x int)`); err != nil {
		t.Fatalf("the old login stopped working: %v", err)
	}
	dataUser, dataPassword := f.creds(t, "knowledge-data")
	data := f.connectAs(t, "knowledge_db", dataUser, dataPassword)
	var n int
	if err := data.QueryRow(ctx, `SELECT count(*) FROM docs.pages`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("data login reads %d pages, %v", n, err)
	}
	if _, err := data.Exec(ctx, `INSERT INTO shared.items VALUES (1)`); err != nil {
		t.Errorf("data login cannot write the adopted table in the superuser's schema: %v", err)
	}
	if got := f.psqlOne(t, "knowledge_db", `SELECT has_table_privilege('knowledge-data', 'shared.audit', 'SELECT')
		OR has_table_privilege('knowledge-data', 'shared.audit', 'DELETE')`); got != "f" {
		t.Errorf("the data role was granted another role's table in the superuser's schema")
	}

	// docs.later belongs to legacy: the next run hands it over and grants it.
	_, statements, _ = f.mustApply(t, c)
	ch = changes(statements)
	if !slices.Contains(ch, `REASSIGN OWNED BY "legacy" TO "knowledge-owner"`) ||
		!slices.Contains(ch, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "docs" TO "knowledge-data"`) || len(ch) != 2 {
		t.Errorf("run after the old login's new table sent %s", fmtList(ch))
	}
	if _, err := data.Exec(ctx, `INSERT INTO docs.later VALUES (1)`); err != nil {
		t.Errorf("data login cannot write the handed-over table: %v", err)
	}
	if _, statements, _ := f.mustApply(t, c); len(changes(statements)) != 0 {
		t.Errorf("third run sent %s", fmtList(changes(statements)))
	}

	// A temporary table an owner login holds lives in its session's own
	// schema, not one of the owner's: a run meanwhile changes nothing.
	session := f.connectAs(t, "knowledge_db", f.pg.User, f.pg.Password)
	defer func() { _ = session.Close(ctx) }()
	if _, err := session.Exec(ctx, `SET ROLE "knowledge-owner"; CREATE TEMP TABLE scratch (x int)`); err != nil {
		t.Fatal(err)
	}
	if _, statements, _ := f.mustApply(t, c); len(changes(statements)) != 0 {
		t.Errorf("a run beside an owner's temporary table sent %s", fmtList(changes(statements)))
	}
}

// A database a superuser owns fails the run at that database, in the adopt
// step; the databases before it stay applied, nothing of it or after it is
// created, and nothing is dropped.
func TestSuperuserOwnedDatabaseFailsTheRun(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", `CREATE DATABASE agents_db`)
	c := f.catalog("auth", "agents", "n8n")
	_, _, _, err := f.apply(t, c)
	step, ok := errors.AsType[*StepError](err)
	if !ok || step.Database != "agents_db" || step.Step != StepAdopt || !strings.Contains(err.Error(), "superuser postgres") {
		t.Fatalf("error %v, want agents_db failing to adopt", err)
	}
	got := f.psqlOne(t, "postgres", `SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE '%-owner' OR rolname LIKE '%-data'`)
	if got != "auth-data,auth-owner" {
		t.Errorf("roles after the failed run: %q", got)
	}
	got = f.psqlOne(t, "postgres", `SELECT string_agg(d.datname || ':' || r.rolname, ',' ORDER BY d.datname) FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE datname LIKE '%_db'`)
	if got != "agents_db:postgres,auth_db:auth-owner" {
		t.Errorf("databases after the failed run: %q", got)
	}
	if _, found, _ := f.writes.ReadDatabaseRole(context.Background(), "database/roles/agents-owner"); found {
		t.Error("the failed database's Vault role was written")
	}
}

// A database the job cannot sign in to fails the run at that database, in
// the connect step; the databases before it stay applied.
func TestADatabaseRefusingConnectionsFailsAtConnect(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", `CREATE ROLE "agents-owner"; CREATE ROLE "agents-data"; CREATE DATABASE agents_db OWNER "agents-owner" ALLOW_CONNECTIONS false`)
	_, _, _, err := f.apply(t, f.catalog("auth", "agents"))
	step, ok := errors.AsType[*StepError](err)
	if !ok || step.Database != "agents_db" || step.Step != StepConnect {
		t.Fatalf("error %v, want agents_db failing to connect", err)
	}
	if got := f.psqlOne(t, "postgres", `SELECT r.rolname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE datname = 'auth_db'`); got != "auth-owner" {
		t.Errorf("auth_db after the failed run is owned by %q", got)
	}
}

// A role that would hand over more than the adopted database is refused:
// REASSIGN OWNED moves every database the role owns.
func TestAdoptionRefusesARoleOwningAnotherDatabase(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", `CREATE ROLE legacy LOGIN; CREATE DATABASE auth_db OWNER legacy; CREATE DATABASE other_db OWNER legacy;`)
	_, statements, _, err := f.apply(t, f.catalog("auth"))
	step, ok := errors.AsType[*StepError](err)
	if !ok || step.Step != StepAdopt || !strings.Contains(err.Error(), "other_db") {
		t.Fatalf("error %v", err)
	}
	if ch := changes(statements); len(ch) != 0 {
		t.Errorf("sent %s", fmtList(ch))
	}
}

// An old owner that does not inherit would keep nothing of what it owned
// once that is the owner role's: from PostgreSQL 16 its membership is
// granted WITH INHERIT TRUE and its logins keep working; before, where only
// the role itself can inherit, the database is refused before any change.
func TestAdoptionOfANoInheritOwner(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", `CREATE ROLE legacy LOGIN NOINHERIT PASSWORD 'legacy-pw'; CREATE DATABASE knowledge_db OWNER legacy;`)
	ctx := context.Background()
	legacy := f.connectAs(t, "knowledge_db", "legacy", "legacy-pw")
	if _, err := legacy.Exec(ctx, `CREATE SCHEMA docs; CREATE TABLE docs.pages (title text)`); err != nil {
		t.Fatal(err)
	}
	_ = legacy.Close(ctx)
	if refusedBefore16(t, f, f.catalog("knowledge"), StepAdopt) {
		return
	}
	legacy = f.connectAs(t, "knowledge_db", "legacy", "legacy-pw")
	if _, err := legacy.Exec(ctx, `INSERT INTO docs.pages VALUES ('home')`); err != nil {
		t.Fatalf("the old login lost its table: %v", err)
	}
}

// A member of the owner role that does not inherit it, and that created
// something in the database, would lose it to the owner role: from
// PostgreSQL 16 its membership is made to inherit first, before that the
// run refuses.
func TestAHolderThatDoesNotInherit(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("auth")
	f.mustApply(t, c)
	f.pg.Psql(t, "postgres", `CREATE ROLE worker LOGIN NOINHERIT PASSWORD 'worker-pw'; GRANT "auth-owner" TO worker;`)
	f.pg.Psql(t, "auth_db", `CREATE SCHEMA jobs; GRANT USAGE, CREATE ON SCHEMA jobs TO worker;`)
	ctx := context.Background()
	worker := f.connectAs(t, "auth_db", "worker", "worker-pw")
	if _, err := worker.Exec(ctx, `CREATE TABLE jobs.queue (id int)`); err != nil {
		t.Fatal(err)
	}
	if refusedBefore16(t, f, c, StepReassign) {
		return
	}
	if _, err := worker.Exec(ctx, `INSERT INTO jobs.queue VALUES (1)`); err != nil {
		t.Fatalf("the member lost its table: %v", err)
	}
}

// A superuser made a member of the owner role, that created something in the
// database, is not reassigned from: its objects are not handed to an
// ordinary role, and the run says so at the reassign step.
func TestASuperuserHolderIsRefused(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("auth")
	f.mustApply(t, c)
	f.pg.Psql(t, "postgres", `CREATE ROLE dba SUPERUSER; GRANT "auth-owner" TO dba;`)
	f.pg.Psql(t, "auth_db", `SET ROLE dba; CREATE TABLE dba_notes (x int);`)
	_, statements, _, err := f.apply(t, c)
	step, ok := errors.AsType[*StepError](err)
	if !ok || step.Database != "auth_db" || step.Step != StepReassign || !strings.Contains(err.Error(), "superuser dba") {
		t.Fatalf("error %v, want auth_db refused at the reassign step", err)
	}
	if ch := changes(statements); len(ch) != 0 {
		t.Errorf("sent %s", fmtList(ch))
	}
	if got := f.psqlOne(t, "auth_db", `SELECT tableowner FROM pg_tables WHERE tablename = 'dba_notes'`); got != "dba" {
		t.Errorf("dba_notes belongs to %q", got)
	}
}

// A data role made before the catalog with more than its grants (here one
// that can log in and bypass row security) is refused: every login Vault
// issues would take it on. Nothing is changed.
func TestADataRoleWithPowersIsRefused(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", `CREATE ROLE "auth-data" LOGIN BYPASSRLS;`)
	_, statements, _, err := f.apply(t, f.catalog("auth"))
	step, ok := errors.AsType[*StepError](err)
	if !ok || step.Database != "auth_db" || step.Step != StepRoles || !strings.Contains(err.Error(), "LOGIN, BYPASSRLS") {
		t.Fatalf("error %v, want auth_db refused at the roles step", err)
	}
	if ch := changes(statements); len(ch) != 0 {
		t.Errorf("sent %s", fmtList(ch))
	}
}

// A failing Vault write names the database and the Vault step; PostgreSQL
// keeps what it committed.
func TestVaultFailureNamesTheStep(t *testing.T) {
	f := newFixture(t)
	f.writes.fail = errors.New("permission denied")
	_, _, _, err := f.apply(t, f.catalog("auth"))
	step, ok := errors.AsType[*StepError](err)
	if !ok || step.Database != "auth_db" || step.Step != StepVault || !strings.Contains(err.Error(), "database/roles/auth-owner") {
		t.Fatalf("error %v", err)
	}
	if got := f.psqlOne(t, "postgres", `SELECT count(*) FROM pg_database WHERE datname = 'auth_db'`); got != "1" {
		t.Errorf("auth_db: %s", got)
	}
}

// A statement PostgreSQL refuses inside the transaction rolls the whole
// database back, the role created before it included, and the failure names
// the step it came from.
func TestFailedStatementRollsBackTheDatabase(t *testing.T) {
	f := newFixture(t)
	// The owner role is already a member of the old owner, so making the old
	// owner a member of it would be circular: PostgreSQL refuses the GRANT.
	f.pg.Psql(t, "postgres", `CREATE ROLE legacy NOLOGIN; CREATE ROLE "auth-owner" NOLOGIN IN ROLE legacy; CREATE DATABASE auth_db OWNER legacy;`)
	_, _, _, err := f.apply(t, f.catalog("auth"))
	step, ok := errors.AsType[*StepError](err)
	if !ok || step.Database != "auth_db" || step.Step != StepAdopt {
		t.Fatalf("error %v, want auth_db failing to adopt", err)
	}
	if got := f.psqlOne(t, "postgres", `SELECT count(*) FROM pg_roles WHERE rolname = 'auth-data'`); got != "0" {
		t.Error("auth-data survived the rollback")
	}
	if got := f.psqlOne(t, "postgres", `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'auth_db'`); got != "legacy" {
		t.Errorf("auth_db is owned by %q after the rollback", got)
	}
}

// refusedBefore16 applies c to a role that does not inherit the owner role.
// Before PostgreSQL 16, where only the role itself can inherit, the run must
// be refused at step, naming why, with nothing sent, and it reports true.
// From 16 the run must succeed.
func refusedBefore16(t *testing.T, f *fixture, c *Catalog, step Step) bool {
	t.Helper()
	version, _ := strconv.Atoi(f.psqlOne(t, "postgres", `SHOW server_version_num`))
	_, statements, _, err := f.apply(t, c)
	if version >= 160000 {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	refused, ok := errors.AsType[*StepError](err)
	if !ok || refused.Step != step || !strings.Contains(err.Error(), "does not inherit") {
		t.Fatalf("error %v, want a refusal at the %s step", err, step)
	}
	if ch := changes(statements); len(ch) != 0 {
		t.Errorf("sent %s", fmtList(ch))
	}
	return true
}
