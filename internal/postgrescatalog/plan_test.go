package postgrescatalog

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func sqlOf(statements []Statement) []string {
	out := make([]string, 0, len(statements))
	for _, s := range statements {
		out = append(out, s.SQL)
	}
	return out
}

// applied is the state of a Project the catalog has applied.
func applied() Shared {
	return Shared{Owner: &Role{}, Data: &Role{}, Database: &DatabaseState{Owner: "auth-owner", DataConnect: true}}
}

// One case per sentence of steps 1 to 4 of a Project's apply (docs/postgres-catalog.md).
func TestPlanShared(t *testing.T) {
	auth := Entry("auth", "database")
	cases := []struct {
		name       string
		state      func(*Shared)
		roles      []string
		create     string
		rest       []string
		refuseStep Step
		refuseText string
	}{{
		name:   "creates the owner and data roles, without login, where they are absent; creates the database owned by the owner",
		state:  func(s *Shared) { *s = Shared{} },
		roles:  []string{`CREATE ROLE "auth-owner" NOLOGIN`, `CREATE ROLE "auth-data" NOLOGIN`},
		create: `CREATE DATABASE "auth_db" OWNER "auth-owner"`,
		rest:   []string{`GRANT CONNECT ON DATABASE "auth_db" TO "auth-data"`},
	}, {
		name:  "creates only the absent role",
		state: func(s *Shared) { s.Data = nil },
		roles: []string{`CREATE ROLE "auth-data" NOLOGIN`},
	}, {
		name:  "an applied Project needs nothing",
		state: func(*Shared) {},
	}, {
		name:  "grants connect on the database where the data role lacks it",
		state: func(s *Shared) { s.Database.DataConnect = false },
		rest:  []string{`GRANT CONNECT ON DATABASE "auth_db" TO "auth-data"`},
	}, {
		name:  "adopts a database another role owns: hands it over, makes the old role a member, reassigns its objects",
		state: func(s *Shared) { s.Database.Owner = "legacy" },
		rest: []string{`ALTER DATABASE "auth_db" OWNER TO "auth-owner"`, `GRANT "auth-owner" TO "legacy"`,
			`REASSIGN OWNED BY "legacy" TO "auth-owner"`},
	}, {
		name: "an old owner already a member is not granted again",
		state: func(s *Shared) {
			s.Database.Owner, s.Database.OwnerIsMember, s.Database.OwnerInherits = "legacy", true, true
		},
		rest: []string{`ALTER DATABASE "auth_db" OWNER TO "auth-owner"`, `REASSIGN OWNED BY "legacy" TO "auth-owner"`},
	}, {
		name:       "a database a superuser owns fails the run",
		state:      func(s *Shared) { s.Database.Owner, s.Database.OwnerSuperuser = "postgres", true },
		refuseStep: StepAdopt, refuseText: "owned by superuser postgres",
	}, {
		name:       "a database its own data role owns is not adopted",
		state:      func(s *Shared) { s.Database.Owner = "auth-data" },
		refuseStep: StepAdopt, refuseText: "its data role",
	}, {
		name: "an old owner owning other databases is refused: REASSIGN OWNED would hand them over too",
		state: func(s *Shared) {
			s.Database.Owner, s.Database.OtherDatabases = "legacy", map[string][]string{"legacy": {"a_db", "b_db"}}
		},
		refuseStep: StepAdopt, refuseText: "also owns database a_db, b_db",
	}, {
		name:       "a NOINHERIT old owner is refused where a grant cannot inherit (before PostgreSQL 16)",
		state:      func(s *Shared) { s.Database.Owner, s.Database.OwnerNoInherit = "legacy", true },
		refuseStep: StepAdopt, refuseText: "legacy, which does not inherit",
	}, {
		name: "a NOINHERIT old owner gets a membership that inherits (PostgreSQL 16 and later)",
		state: func(s *Shared) {
			s.Database.Owner, s.Database.OwnerNoInherit, s.Database.GrantsInherit = "legacy", true, true
		},
		rest: []string{`ALTER DATABASE "auth_db" OWNER TO "auth-owner"`, `GRANT "auth-owner" TO "legacy" WITH INHERIT TRUE`,
			`REASSIGN OWNED BY "legacy" TO "auth-owner"`},
	}, {
		name: "a membership granted without INHERIT is granted again with it",
		state: func(s *Shared) {
			s.Database.Owner, s.Database.OwnerIsMember, s.Database.GrantsInherit = "legacy", true, true
		},
		rest: []string{`ALTER DATABASE "auth_db" OWNER TO "auth-owner"`, `GRANT "auth-owner" TO "legacy" WITH INHERIT TRUE`,
			`REASSIGN OWNED BY "legacy" TO "auth-owner"`},
	}, {
		name: "a holder that does not inherit is refused where a grant cannot inherit (before PostgreSQL 16)",
		state: func(s *Shared) {
			s.Database.Holders, s.Database.HoldersNotInheriting = []string{"old"}, []string{"old"}
		},
		refuseStep: StepReassign, refuseText: "old owns objects in auth_db but does not inherit",
	}, {
		name: "a holder that does not inherit gets a membership that does, then is reassigned from (PostgreSQL 16 and later)",
		state: func(s *Shared) {
			s.Database.Holders, s.Database.HoldersNotInheriting, s.Database.GrantsInherit = []string{"old"}, []string{"old"}, true
		},
		rest: []string{`GRANT "auth-owner" TO "old" WITH INHERIT TRUE`, `REASSIGN OWNED BY "old" TO "auth-owner"`},
	}, {
		name: "an old owner owning a tablespace is refused: REASSIGN OWNED would hand it over too",
		state: func(s *Shared) {
			s.Database.Owner, s.Database.Tablespaces = "legacy", map[string][]string{"legacy": {"fast_ssd"}}
		},
		refuseStep: StepAdopt, refuseText: "also owns tablespace fast_ssd",
	}, {
		name: "a superuser among the owner role's members that holds objects is refused",
		state: func(s *Shared) {
			s.Database.Holders, s.Database.SuperuserHolders = []string{"dba", "old"}, []string{"dba"}
		},
		refuseStep: StepReassign, refuseText: "superuser dba",
	}, {
		name:  "reassigns what every adopted role has created since",
		state: func(s *Shared) { s.Database.Holders = []string{"old-b", "old-a"} },
		rest:  []string{`REASSIGN OWNED BY "old-a" TO "auth-owner"`, `REASSIGN OWNED BY "old-b" TO "auth-owner"`},
	}, {
		name: "an adopted role owning another database is refused",
		state: func(s *Shared) {
			s.Database.Holders, s.Database.OtherDatabases = []string{"old"}, map[string][]string{"old": {"x_db"}}
		},
		refuseStep: StepReassign, refuseText: "also owns database x_db",
	}, {
		name: "the role adopted in this run is reassigned once",
		state: func(s *Shared) {
			s.Database.Owner, s.Database.OwnerIsMember, s.Database.OwnerInherits, s.Database.Holders = "legacy", true, true, []string{"legacy"}
		},
		rest: []string{`ALTER DATABASE "auth_db" OWNER TO "auth-owner"`, `REASSIGN OWNED BY "legacy" TO "auth-owner"`},
	}, {
		name:       "an owner role that is a superuser is refused",
		state:      func(s *Shared) { s.Owner.Superuser = true },
		refuseStep: StepRoles, refuseText: "auth-owner is a superuser",
	}, {
		name:       "a data role that is a superuser is refused",
		state:      func(s *Shared) { s.Data.Superuser = true },
		refuseStep: StepRoles, refuseText: "auth-data is a superuser",
	}, {
		name:       "an owner role that can log in is refused",
		state:      func(s *Shared) { s.Owner.Login = true },
		refuseStep: StepRoles, refuseText: "auth-owner holds LOGIN;",
	}, {
		name: "a data role with powers beyond its grants is refused, each named",
		state: func(s *Shared) {
			s.Data.CreateRole, s.Data.CreateDB, s.Data.Replication, s.Data.BypassRLS = true, true, true, true
		},
		refuseStep: StepRoles, refuseText: "auth-data holds CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS;",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := applied()
			c.state(&s)
			roles, create, rest, err := PlanShared(auth, s)
			if c.refuseStep != "" {
				r, ok := errors.AsType[*Refusal](err)
				if !ok || r.Step != c.refuseStep || !strings.Contains(err.Error(), c.refuseText) {
					t.Fatalf("error %v, want a refusal at %s saying %q", err, c.refuseStep, c.refuseText)
				}
				if roles != nil || create != nil || rest != nil {
					t.Errorf("a refusal planned statements")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sqlOf(roles), c.roles) {
				t.Errorf("roles %q, want %q", sqlOf(roles), c.roles)
			}
			if create != nil {
				if create.SQL != c.create || create.Step != StepDatabase {
					t.Errorf("create %+v, want %q", create, c.create)
				}
			} else if c.create != "" {
				t.Errorf("no create, want %q", c.create)
			}
			if !slices.Equal(sqlOf(rest), c.rest) {
				t.Errorf("rest %q, want %q", sqlOf(rest), c.rest)
			}
		})
	}
}

// Step 5: read and write on every table and sequence of the owner's
// schemas, now and by default, and usage of those schemas.
func TestPlanGrants(t *testing.T) {
	auth := Entry("auth", "database")
	complete := map[string][]string{
		"r": {"SELECT", "INSERT", "UPDATE", "DELETE"}, "S": {"USAGE", "SELECT", "UPDATE"}, "n": {"USAGE"},
	}
	cases := []struct {
		name string
		in   Inside
		want []string
	}{{
		name: "a database with every grant needs nothing",
		in:   Inside{Defaults: complete},
	}, {
		name: "a fresh database gets the owner's default privileges for tables, sequences and schemas",
		want: []string{
			`ALTER DEFAULT PRIVILEGES FOR ROLE "auth-owner" GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "auth-data"`,
			`ALTER DEFAULT PRIVILEGES FOR ROLE "auth-owner" GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO "auth-data"`,
			`ALTER DEFAULT PRIVILEGES FOR ROLE "auth-owner" GRANT USAGE ON SCHEMAS TO "auth-data"`,
		},
	}, {
		name: "a default missing one privilege is granted again",
		in: Inside{Defaults: map[string][]string{
			"r": {"SELECT", "INSERT", "UPDATE"}, "S": complete["S"], "n": complete["n"],
		}},
		want: []string{`ALTER DEFAULT PRIVILEGES FOR ROLE "auth-owner" GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "auth-data"`},
	}, {
		name: "schemas, tables and sequences lacking grants get them, per schema, in name order",
		in: Inside{
			SchemasWithoutUsage: []string{"docs"}, SchemasLackingTables: []string{"public", "docs", "docs"},
			SchemasLackingSequence: []string{"public"}, Defaults: complete,
		},
		want: []string{
			`GRANT USAGE ON SCHEMA "docs" TO "auth-data"`,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "docs" TO "auth-data"`,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "public" TO "auth-data"`,
			`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA "public" TO "auth-data"`,
		},
	}, {
		name: "in a schema another role owns, only the owner's own relations are granted, each by name",
		in: Inside{
			TablesLacking:    [][2]string{{"public", "pages"}, {"public", `x"y`}},
			SequencesLacking: [][2]string{{"public", "pages_id_seq"}}, Defaults: complete,
		},
		want: []string{
			`GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "public"."pages" TO "auth-data"`,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "public"."x""y" TO "auth-data"`,
			`GRANT USAGE, SELECT, UPDATE ON SEQUENCE "public"."pages_id_seq" TO "auth-data"`,
		},
	}, {
		name: "a hostile schema name is quoted",
		in:   Inside{SchemasWithoutUsage: []string{`x"; DROP DATABASE y; --`}, Defaults: complete},
		want: []string{`GRANT USAGE ON SCHEMA "x""; DROP DATABASE y; --" TO "auth-data"`},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PlanGrants(auth, c.in)
			if !slices.Equal(sqlOf(got), c.want) {
				t.Errorf("got %q\nwant %q", sqlOf(got), c.want)
			}
			for _, s := range got {
				if s.Step != StepGrants {
					t.Errorf("%q is in step %s", s.SQL, s.Step)
				}
			}
		})
	}
}

// Identifiers are always quoted: a hostile Project that reached the planner
// past the decoder stays one identifier in every statement.
func TestPlanQuotesHostileIdentifiers(t *testing.T) {
	p := Entry(`x"; DROP DATABASE y; --`, "database")
	roles, create, rest, err := PlanShared(p, Shared{})
	if err != nil {
		t.Fatal(err)
	}
	want := `CREATE DATABASE "x""; DROP DATABASE y; --_db" OWNER "x""; DROP DATABASE y; ---owner"`
	if create.SQL != want {
		t.Errorf("create %q, want %q", create.SQL, want)
	}
	for _, s := range append(append(roles, rest...), PlanGrants(p, Inside{})...) {
		if strings.Count(s.SQL, `"x""; DROP DATABASE y; --`) == 0 {
			t.Errorf("%q lost the quoting", s.SQL)
		}
	}
	if got := RoleFor("c", p.DataRole).CreationStatements[1]; got != `ALTER ROLE "{{name}}" SET role = "x""; DROP DATABASE y; ---data";` {
		t.Errorf("Vault statement %q", got)
	}
}

func TestStepErrorNamesDatabaseAndStep(t *testing.T) {
	err := &StepError{Project: "auth", Database: "auth_db", Step: StepGrants, Err: errors.New("boom")}
	if err.Error() != "database auth_db, step grants: boom" || !errors.Is(err, err.Err) {
		t.Errorf("%q", err.Error())
	}
}

func TestDatabaseRoleEqual(t *testing.T) {
	a := RoleFor("platform-postgres", "auth-data")
	if !a.Equal(RoleFor("platform-postgres", "auth-data")) || a.Equal(RoleFor("other", "auth-data")) || a.Equal(RoleFor("platform-postgres", "auth-owner")) {
		t.Error("Equal does not compare connection and statements")
	}
	b := a
	b.CreationStatements = a.CreationStatements[:1]
	if a.Equal(b) {
		t.Error("a role missing its SET role statement compares equal")
	}
}
